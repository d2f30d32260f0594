"""The built-in workloads on their own (no Ray): batch-size controllers, a job asking for a new batch size and
resuming at it from its checkpoint, and `profile-workloads` feeding a simulation."""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import pytest

from conftest import require_module, shockwave

require_module("torch", "the workloads train real PyTorch models: pip install torch==2.13.0")

import torch  # noqa: E402  (after the check above)

from shockwave.core.state import JobState, rescale_to_batch_size  # noqa: E402
from shockwave.training import lease as client  # noqa: E402
from shockwave.training.adaptive import Accordion, GradientNoiseScale, StepGradients  # noqa: E402
from shockwave.training.local import TRAIN, run_lease  # noqa: E402
from shockwave.workload_model.catalog import family  # noqa: E402
from shockwave.workload_model.profile import build_profile  # noqa: E402
from shockwave.workload_model.throughput import load_throughputs  # noqa: E402
from shockwave.workload_model.trace import catalog_job, write_trace  # noqa: E402


# -- controllers -------------------------------------------------------------------------------------------------
def feed_epoch(ctl: Accordion, gradient: list[float], steps: int) -> None:
    for _ in range(steps):
        ctl.observe(StepGradients(torch.tensor(gradient)))


def test_accordion_uses_the_small_batch_while_the_gradient_norm_changes_fast() -> None:
    ctl = Accordion(small=32, large=256)
    feed_epoch(ctl, [3.0, 4.0], 10)  # norm 5: the first epoch is critical
    assert ctl.epoch_end(32) == 32
    feed_epoch(ctl, [2.4, 3.2], 3)  # norm 4 (averaged, so 3 steps or 10 do not matter): 20% change
    assert ctl.epoch_end(32) == 256
    feed_epoch(ctl, [0.6, 0.8], 40)  # norm 1: 75% drop, a critical regime again
    assert ctl.epoch_end(256) == 32
    restored = Accordion(small=32, large=256)
    restored.load_state_dict(ctl.state_dict())
    feed_epoch(restored, [0.6, 0.8], 5)
    assert restored.epoch_end(32) == 256 and restored.history == pytest.approx([5.0, 4.0, 1.0, 1.0])


def test_gns_estimates_the_noise_scale_of_known_gradients_and_doubles_past_it() -> None:
    """Per-sample gradients G + noise with covariance sigma^2 I in d dimensions: B_noise = d sigma^2 / |G|^2."""
    generator = torch.Generator().manual_seed(0)
    d, sigma, true = 50, 1.0, torch.full((50,), 0.2)  # |G|^2 = 2, tr(Sigma) = 50: B_noise = 25
    ctl = GradientNoiseScale(maximum=128)
    for _ in range(3000):
        samples = true + sigma * torch.randn(16, d, generator=generator)
        small = [samples[:8].mean(0), samples[8:].mean(0)]
        big = samples.mean(0)
        ctl.observe(StepGradients(big, sum(float(g.pow(2).sum()) for g in small) / 2, 8, 16))
    assert ctl.noise_scale == pytest.approx(d * sigma**2 / float(true.pow(2).sum()), rel=0.15)
    state = ctl.state_dict()
    assert ctl.epoch_end(16) == 32  # 25 > 16: double
    ctl.load_state_dict(state)  # the same epoch, resumed from a checkpoint
    assert ctl.epoch_end(32) == 32  # 25 < 32: stay
    assert ctl.epoch_end(32) == 32 and math.isnan(ctl.history[-1])  # a new epoch without steps: no estimate
    assert GradientNoiseScale(maximum=32, sum_sq=1.0, sum_noise=100.0).epoch_end(32) == 32  # capped at the maximum


# -- a job switching batch size ----------------------------------------------------------------------------------
def lease_terms(model: str, bs: int, total: int, resume: int = 0) -> client.Terms:
    return client.Terms(
        job_id=3,
        deadline=time.time() + 300,
        max_steps=total,
        total_steps=total,
        batch_size=bs,
        checkpoint="",
        resume_step=resume,
        epoch_steps=family(model).iterations_per_epoch(bs),
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("model", "bs", "mode", "gang", "epochs"),
    [("Transformer", 32, "accordion", 1, 3), ("Transformer", 16, "gns", 1, 2), ("Transformer", 16, "gns", 2, 2)],
)
def test_a_job_asks_for_a_batch_size_and_resumes_at_it_from_its_checkpoint(
    tmp_path: Path, model: str, bs: int, mode: str, gang: int, epochs: int
) -> None:
    """What the runtime does with such a job, without Ray: the first lease ends at an epoch boundary with a
    request; the step count is converted keeping the epochs done; the second lease finishes at the new size."""
    spec = catalog_job(model, bs, gang, family(model).iterations_per_epoch(bs) * epochs, mode, 0.0).job()
    state = JobState.admit(0, spec, build_profile(spec, load_throughputs(None)), 1.0)
    command = [*TRAIN, "--family", model, "--mode", mode, "--seed", "3"]
    first = run_lease(command, lease_terms(model, bs, state.total_steps), gang, tmp_path)
    assert first.codes == [0] * gang, first.output
    wanted = first.progress["requested_batch_size"]
    checkpoint = tmp_path / "rank-0" / "checkpoint.pt"
    before = torch.load(checkpoint, weights_only=False)
    assert wanted is not None and wanted > bs and wanted <= family(model).max_batch_size
    assert before["step"] % state.iterations_per_epoch == 0 and before["batch_size"] == bs  # at an epoch boundary
    state.steps_done = before["step"]
    rescale_to_batch_size(state, wanted, round_up_progress=False)
    terms = lease_terms(model, wanted, state.total_steps, resume=state.steps_done)
    second = run_lease(command, terms, gang, tmp_path, checkpoint)
    assert second.codes == [0] * gang, second.output
    after = torch.load(checkpoint, weights_only=False)
    assert [(s["step"], s["batch_size"]) for s in after["starts"]] == [(0, bs), (state.steps_done, wanted)]
    assert after["batch_size"] == wanted and after["completions"] in (0, 1)
    # The epochs done at the old batch size count at the new one: samples seen are those of the same epochs.
    assert after["samples"] == before["samples"] + (after["step"] - state.steps_done) * wanted
    assert before["samples"] == before["step"] * bs
    assert math.isclose(after["samples"], spec.total_steps * bs, rel_tol=2 * wanted / (spec.total_steps * bs) + 0.01)


def test_a_job_whose_loss_diverges_fails_loudly(tmp_path: Path) -> None:
    script = "import shockwave.training.train as t; t.BASE_LR = 1e30; t.main()"
    command = [sys.executable, "-c", script, "--family", "Recommendation"]
    lease = run_lease(command, lease_terms("Recommendation", 512, 200), 1, tmp_path)
    assert lease.codes != [0] and "the loss is" in lease.output


# -- profile-workloads -------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_profile_workloads_writes_a_table_that_drives_a_simulation(tmp_path: Path) -> None:
    table = tmp_path / "here.json"
    done = shockwave(
        "profile-workloads", "--out", table, "--families", "Transformer", "--batch-sizes", "16,32",
        "--gangs", "1,2", "--seconds", "0.5",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    entries = json.loads(table.read_text())["v100"]
    assert set(entries) == {str((f"Transformer (batch size {b})", g)) for b in (16, 32) for g in (1, 2)}
    assert all(value["null"] > 0 for value in entries.values())
    trace = tmp_path / "t.trace"
    jobs = [catalog_job("Transformer", 16, 2, 3000, "static", 0), catalog_job("Transformer", 32, 1, 2000, "static", 5)]
    write_trace(jobs, trace)
    sim = shockwave("simulate", "--trace", trace, "--throughputs", table, "--gpus", 2, "--policy", "gavel", "--json")
    assert sim.returncode == 0, sim.stderr
    result = json.loads(sim.stdout)
    rate = entries[str(("Transformer (batch size 16)", 2))]["null"]
    assert result["jobs"][0]["t_isolated_s"] == pytest.approx(
        math.ceil(3000 / family("Transformer").iterations_per_epoch(16)) * 10000 / 16 / rate
    )


def test_profile_workloads_rejects_what_it_cannot_measure(tmp_path: Path) -> None:
    unknown = shockwave("profile-workloads", "--out", tmp_path / "x.json", "--families", "A3C")
    assert unknown.returncode == 2 and "no built-in workload for 'A3C'" in unknown.stderr
    too_big = shockwave("profile-workloads", "--out", tmp_path / "x.json", "--families", "LM", "--batch-sizes", "512")
    assert too_big.returncode == 2 and "outside LM's range" in too_big.stderr
    assert not (tmp_path / "x.json").exists()
