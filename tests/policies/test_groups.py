"""Policy groups: names that stand for several policies wherever a list of policies is taken."""

from __future__ import annotations

from shockwave.cli.common import parse_policies
from shockwave.policies.builtin import BUILTIN
from shockwave.policies.names import BUILTIN_NAMES
from shockwave.policies.registry import ALIASES, GROUPS, OWN_MECHANISM, POLICIES, expand_groups


def test_published_is_shockwave_and_its_papers_baselines() -> None:
    assert expand_groups(["published"]) == [
        "shockwave", "max_min_fairness", "finish_time_fairness", "allox", "gandiva_fair", "max_sum_throughput_perf",
        "min_total_duration",
    ]  # fmt: skip


def test_groups_name_known_policies_and_all_is_every_one() -> None:
    assert expand_groups(["all"]) == list(POLICIES)
    for members in GROUPS.values():
        assert set(members) <= set(POLICIES) and len(set(members)) == len(members)
    assert not set(GROUPS["gavel-all"]) & set(OWN_MECHANISM)
    assert {"max_min_fairness_packed", "gandiva", "fifo_packed"} <= set(GROUPS["packed"])
    assert {"sia", "max_min_fairness_perf"} <= set(GROUPS["heterogeneity-aware"])
    assert "max_min_fairness" not in GROUPS["heterogeneity-aware"]


def test_groups_mix_with_names_each_policy_once_in_order() -> None:
    assert parse_policies("fifo, published ,shockwave")[:3] == ["fifo", "shockwave", "max_min_fairness"]
    assert parse_policies("fifo,published,shockwave").count("shockwave") == 1


def test_help_names_are_the_built_ins() -> None:
    """`simulate --help` lists the built-ins from a light module: it must name exactly BUILTIN's, and the aliases."""
    assert tuple(BUILTIN) == BUILTIN_NAMES
    from shockwave.cli.simulation import POLICY_HELP

    assert all(alias in POLICY_HELP for alias in ALIASES if alias != "max_sum_throughput")


def test_gavel_stays_the_alias_of_max_min_fairness() -> None:
    assert expand_groups(["gavel"]) == ["gavel"] and "gavel" not in GROUPS
