"""Batch-size controllers a training job runs itself: Accordion and the gradient noise scale (GNS).

Both look at gradients the job computes anyway and decide at epoch boundaries, so a request reaches the scheduler
at a clean point (whole epochs done) and the job resumes exactly where it stopped.

- Accordion (Agarwal et al., MLSys'21): an epoch is in a critical regime when the norm of its accumulated gradient
  changed by at least `threshold` (0.5 in the paper) relative to the previous epoch's; critical epochs train at the
  small batch size, the others at the large one. The first epoch is critical (there is nothing to compare with).
  The gradient is averaged over the epoch's steps rather than summed: a larger batch takes fewer steps per epoch,
  and a sum would read that as a change of regime.
- GNS (McCandlish et al., 2018, appendix A): from gradients over B_small and B_big samples, unbiased estimates
  |G|^2 = (B_big |g_big|^2 - B_small |g_small|^2) / (B_big - B_small) and
  S = (|g_small|^2 - |g_big|^2) / (1/B_small - 1/B_big); each is averaged over the epoch's steps and the simple
  noise scale is B_noise = S / |G|^2. Once it has grown past the current batch size, the batch size doubles (up to
  the family's maximum).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

MODES = ("static", "accordion", "gns")


@dataclass(frozen=True)
class StepGradients:
    """One step's gradient statistics: the applied gradient and, for GNS, the two-batch-size norms."""

    gradient: torch.Tensor
    """The averaged gradient the optimizer applies (flattened)."""
    small_sq_norm: float = 0.0
    """Mean squared norm of the per-worker (or per-micro-batch) gradients."""
    small_batch: float = 0.0
    big_batch: float = 0.0


class Controller(Protocol):
    needs_small_gradients: bool

    def observe(self, stats: StepGradients) -> None: ...

    def epoch_end(self, batch_size: int) -> int:
        """The batch size the next epoch should train with."""
        ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


@dataclass
class Static:
    needs_small_gradients: bool = False

    def observe(self, stats: StepGradients) -> None:
        return None

    def epoch_end(self, batch_size: int) -> int:
        return batch_size

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        return None


@dataclass
class Accordion:
    small: int
    large: int
    threshold: float = 0.5
    needs_small_gradients: bool = False
    epoch_sum: torch.Tensor | None = None
    epoch_steps: int = 0
    previous_norm: float | None = None
    history: list[float] = field(default_factory=list)
    """Each finished epoch's accumulated-gradient norm (kept in the checkpoint, for inspection)."""

    def observe(self, stats: StepGradients) -> None:
        grad = stats.gradient.detach()
        self.epoch_sum = grad.clone() if self.epoch_sum is None else self.epoch_sum.add_(grad)
        self.epoch_steps += 1

    def epoch_end(self, batch_size: int) -> int:
        if self.epoch_sum is None:
            return batch_size
        norm = float(self.epoch_sum.norm()) / self.epoch_steps
        critical = self.previous_norm is None or abs(self.previous_norm - norm) >= self.threshold * self.previous_norm
        self.previous_norm, self.epoch_sum, self.epoch_steps = norm, None, 0
        self.history.append(norm)
        return self.small if critical else self.large

    def state_dict(self) -> dict[str, Any]:
        return {
            "epoch_sum": self.epoch_sum,
            "epoch_steps": self.epoch_steps,
            "previous_norm": self.previous_norm,
            "history": list(self.history),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.epoch_sum, self.epoch_steps = state["epoch_sum"], state["epoch_steps"]
        self.previous_norm = state["previous_norm"]
        self.history = list(state["history"])


@dataclass
class GradientNoiseScale:
    maximum: int
    needs_small_gradients: bool = True
    sum_sq: float = 0.0
    """Sum over the epoch's steps of the |G|^2 estimates."""
    sum_noise: float = 0.0
    """Sum over the epoch's steps of the tr(Sigma) estimates."""
    history: list[float] = field(default_factory=list)
    """B_noise at each epoch end (NaN when the epoch's |G|^2 estimate was not positive)."""

    def observe(self, stats: StepGradients) -> None:
        small, big = stats.small_batch, stats.big_batch
        if not 0 < small < big:
            return
        big_sq = float(stats.gradient.pow(2).sum())
        self.sum_sq += (big * big_sq - small * stats.small_sq_norm) / (big - small)
        self.sum_noise += (stats.small_sq_norm - big_sq) / (1 / small - 1 / big)

    @property
    def noise_scale(self) -> float | None:
        """The epoch's estimates averaged before dividing: each step's are far too noisy on their own."""
        return self.sum_noise / self.sum_sq if self.sum_sq > 0 else None

    def epoch_end(self, batch_size: int) -> int:
        scale = self.noise_scale
        self.history.append(float("nan") if scale is None else scale)
        self.sum_sq = self.sum_noise = 0.0
        if scale is not None and scale > batch_size and batch_size < self.maximum:
            return min(2 * batch_size, self.maximum)
        return batch_size

    def state_dict(self) -> dict[str, Any]:
        return {"sum_sq": self.sum_sq, "sum_noise": self.sum_noise, "history": list(self.history)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.sum_sq, self.sum_noise, self.history = state["sum_sq"], state["sum_noise"], list(state["history"])


def controller(mode: str, initial_batch_size: int, max_batch_size: int) -> Controller:
    if mode == "accordion":
        return Accordion(small=initial_batch_size, large=max_batch_size)
    if mode == "gns":
        return GradientNoiseScale(maximum=max_batch_size)
    if mode == "static":
        return Static()
    raise SystemExit(f"unknown mode {mode!r}; known: {', '.join(MODES)}")
