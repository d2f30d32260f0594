"""The model families jobs are drawn from: data, not code paths.

A new family is a new `ModelFamily` entry. Numbers (dataset sizes, batch-size ranges, Accordion critical regimes,
GNS switch epochs, launch commands) follow the Shockwave NSDI'23 artifact as summarised in SHOCKWAVE_SPEC.md §1.2-1.5.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

from shockwave.core.errors import InputError


@dataclass(frozen=True)
class AccordionRule:
    """Epochs in a critical regime train at the initial batch size; all others at the family maximum.

    `initial` maps an initial batch size to the length of the opening critical regime (`initial_default` otherwise).
    `windows` are further critical epoch ranges; `period=(P, L)` marks every epoch with e mod P < L as critical.
    `profile_only_windows` are windows the reference simulator's run-time rule forgets (spec §1.5b, §9 item 8).
    """

    initial_default: int = 0
    initial: dict[int, int] = field(default_factory=dict)
    windows: tuple[tuple[int, int], ...] = ()
    period: tuple[int, int] | None = None
    profile_only_windows: tuple[tuple[int, int], ...] = ()

    def is_critical(self, epoch: int, initial_bs: int, *, with_profile_windows: bool) -> bool:
        if epoch < self.initial.get(initial_bs, self.initial_default):
            return True
        if self.period is not None and epoch % self.period[0] < self.period[1]:
            return True
        windows = self.windows + (self.profile_only_windows if with_profile_windows else ())
        return any(lo <= epoch < hi for lo, hi in windows)


@dataclass(frozen=True)
class ModelFamily:
    name: str
    dataset: str
    dataset_size: int
    template_batch_sizes: tuple[int, ...]
    min_batch_size: int
    max_batch_size: int
    distributable: bool
    command: str
    working_directory: str
    num_steps_arg: str
    generated: bool = True
    accordion: AccordionRule | None = None
    gns_switch_epochs: dict[tuple[int, int], tuple[int, ...]] = field(default_factory=dict)
    """(initial batch size, scale factor) -> epochs at which the batch size doubles (stage k runs at bs0 * 2**k)."""

    def job_type(self, batch_size: int) -> str:
        return f"{self.name} (batch size {batch_size})"

    def launch_command(self, batch_size: int) -> str:
        return self.command.format(batch_size=batch_size)

    def iterations_per_epoch(self, batch_size: int) -> int:
        return math.ceil(self.dataset_size / batch_size)


RESNET18 = ModelFamily(
    name="ResNet-18",
    dataset="CIFAR-10",
    dataset_size=50000,
    template_batch_sizes=(32, 64, 128, 256),
    min_batch_size=16,
    max_batch_size=256,
    distributable=True,
    command="python3 main.py --data_dir=%s/cifar10 --batch_size {batch_size}",
    working_directory="image_classification/cifar10",
    num_steps_arg="--num_steps",
    accordion=AccordionRule(initial_default=10, initial={256: 20}, windows=((150, 160), (250, 260))),
    gns_switch_epochs={
        (16, 1): (31, 41, 51, 71),
        (32, 1): (21, 31, 51),
        (64, 1): (11, 31),
        (128, 1): (11,),
        (16, 2): (21, 31, 91, 111),
        (32, 2): (11, 21, 41),
        (64, 2): (21, 41),
        (128, 2): (41,),
        (16, 4): (11, 21, 81, 91),
        (32, 4): (21, 31, 61),
        (64, 4): (11, 61),
        (128, 4): (11,),
    },
)

RESNET50 = ModelFamily(
    name="ResNet-50",
    dataset="ImageNet",
    dataset_size=100000,
    template_batch_sizes=(16, 32, 64),
    min_batch_size=16,
    max_batch_size=128,
    distributable=True,
    command="python3 main.py -j 4 -a resnet50 -b {batch_size} %s/imagenet/",
    working_directory="image_classification/imagenet",
    num_steps_arg="--num_minibatches",
    accordion=AccordionRule(period=(30, 10)),
    gns_switch_epochs={
        (64, 1): (101,),
        (32, 2): (101, 111),
        (64, 2): (81,),
        (32, 4): (131, 221),
        (64, 4): (191,),
    },
)

TRANSFORMER = ModelFamily(
    name="Transformer",
    dataset="Multi30k",
    dataset_size=10000,
    template_batch_sizes=(16, 32, 64, 128),
    min_batch_size=16,
    max_batch_size=128,
    distributable=True,
    command="python3 train.py -data %s/translation/multi30k.atok.low.pt -batch_size {batch_size} -proj_share_weight",
    working_directory="translation",
    num_steps_arg="-step",
)

LM = ModelFamily(
    name="LM",
    dataset="Wikitext-2",
    dataset_size=59675,
    template_batch_sizes=(5, 10, 20, 40, 80),
    min_batch_size=5,
    max_batch_size=80,
    distributable=True,
    command="python3 main.py --cuda --data %s/wikitext2 --batch_size {batch_size}",
    working_directory="language_modeling",
    num_steps_arg="--steps",
    accordion=AccordionRule(initial_default=10),
    gns_switch_epochs={
        (5, 1): (31, 41, 61, 71),
        (10, 1): (11, 21, 41),
        (20, 1): (11, 41),
        (40, 1): (11,),
        (5, 2): (31, 51, 61, 71),
        (10, 2): (11, 31, 41),
        (20, 2): (31, 41),
        (40, 2): (11,),
        (5, 4): (11, 31, 71, 91),
        (10, 4): (11, 31, 61),
        (20, 4): (11, 61),
        (40, 4): (61,),
    },
)

RECOMMENDATION = ModelFamily(
    name="Recommendation",
    dataset="ML-20M",
    dataset_size=117907,
    template_batch_sizes=(512, 1024, 2048, 4096, 8192),
    min_batch_size=512,
    max_batch_size=8192,
    distributable=False,
    command="python3 train.py --data_dir %s/ml-20m/pro_sg/ --batch_size {batch_size}",
    working_directory="recommendation",
    num_steps_arg="-n",
    accordion=AccordionRule(
        initial_default=10, initial={512: 30, 1024: 30, 2048: 40}, profile_only_windows=((60, 70), (80, 90))
    ),
    gns_switch_epochs={(512, 1): (21, 41, 71, 91), (1024, 1): (21, 51, 91), (2048, 1): (21, 41), (4096, 1): (41,)},
)

A3C = ModelFamily(
    name="A3C",
    dataset="Pong",
    dataset_size=4,
    template_batch_sizes=(4,),
    min_batch_size=4,
    max_batch_size=4,
    distributable=False,
    command="python3 main.py --env PongDeterministic-v4 --workers 4 --amsgrad True",
    working_directory="rl",
    num_steps_arg="--max-steps",
    generated=False,
)

CYCLEGAN = ModelFamily(
    name="CycleGAN",
    dataset="monet2photo",
    dataset_size=6287,
    template_batch_sizes=(1,),
    min_batch_size=1,
    max_batch_size=1,
    distributable=False,
    command="python3 cyclegan.py --dataset_path %s/monet2photo --decay_epoch 0",
    working_directory="cyclegan",
    num_steps_arg="--n_steps",
    generated=False,
)

FAMILIES: dict[str, ModelFamily] = {
    f.name: f for f in (RESNET18, RESNET50, TRANSFORMER, LM, RECOMMENDATION, A3C, CYCLEGAN)
}

MODES = ("static", "accordion", "gns")


@dataclass(frozen=True)
class Template:
    family: ModelFamily
    batch_size: int


def generator_templates() -> list[Template]:
    """The templates the trace generator draws from, in the order that reproduces the reference traces."""
    return [Template(f, bs) for f in FAMILIES.values() if f.generated for bs in f.template_batch_sizes]


def split_job_type(job_type: str) -> tuple[str, int]:
    """'ResNet-18 (batch size 32)' -> ('ResNet-18', 32); Gavel names a family of one batch size bare ('A3C')."""
    model, sep, rest = job_type.partition(" (batch size ")
    if not sep and model in FAMILIES and len(FAMILIES[model].template_batch_sizes) == 1:
        return model, FAMILIES[model].template_batch_sizes[0]
    if not sep or not rest.endswith(")") or not rest[:-1].isdigit():
        raise ValueError(f"job type {job_type!r} is not of the form '<Model> (batch size <B>)'")
    return model, int(rest[:-1])


WORKLOAD_FAMILIES = ("ResNet-18", "ResNet-50", "LM", "Transformer", "Recommendation")
"""Families with a built-in PyTorch workload (`shockwave.training.train`), named here so that code which must not
import torch (the service, the CLI) knows them too."""


IMPORTED: dict[str, ModelFamily] = {}
"""Families read from a user's files in this process (Sia's applications, `workload_model/sia/`)."""


def register_imported(imported: ModelFamily) -> None:
    """Make an imported family known by its name; the same name read again must describe the same family."""
    if imported.name in FAMILIES:
        raise InputError(f"imported application {imported.name!r} has the name of a built-in model")
    known = IMPORTED.setdefault(imported.name, imported)
    if known != imported:
        differ = [
            f"{f.name} {getattr(known, f.name)} then {getattr(imported, f.name)}"
            for f in fields(ModelFamily)
            if getattr(known, f.name) != getattr(imported, f.name)
        ]
        raise InputError(
            f"application {imported.name!r} was read before from other profiles in this process ({'; '.join(differ)}):"
            " one process runs one set of profiles"
        )


def family(name: str) -> ModelFamily:
    try:
        return FAMILIES[name] if name in FAMILIES else IMPORTED[name]
    except KeyError:
        raise InputError(f"unknown model {name!r}; known models: {', '.join([*FAMILIES, *IMPORTED])}") from None
