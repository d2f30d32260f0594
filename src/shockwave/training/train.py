"""A small real training job per model family, on synthetic data, driven by a shockwave lease.

    python -m shockwave.training.train --family ResNet-18 --mode accordion

The batch size, step budget and checkpoint path come from the lease (`shockwave.training.lease`). Data for global
step s is drawn from a generator seeded with (seed, step, rank), so a job resumed from a checkpoint continues the very
same stream, on any node. Gangs (`SHOCKWAVE_WORLD_SIZE` > 1) train data-parallel over gloo, each member on
batch_size / world_size samples. `--mode accordion|gns` lets the job pick its batch size from its own gradients
(`adaptive`); it asks the scheduler at an epoch boundary and goes on at the new batch size, from its checkpoint,
when restarted with it. The checkpoint holds model, optimizer, controller state, step, batch size and samples seen,
plus the steps at which the job was (re)started and how often it completed, so a run can be audited afterwards.
"""

from __future__ import annotations

import argparse
import math
import os
import socket
import sys
import time
from dataclasses import dataclass
from typing import Any, NoReturn

import torch
import torch.distributed as dist
from torch import nn

from shockwave.training import adaptive
from shockwave.training import lease as client
from shockwave.workload_model.catalog import family as catalog_family

BASE_LR = 0.01
VOCAB = 128
SEQUENCE = 16
LABELS = torch.randn(3 * 16 * 16, 10, generator=torch.Generator().manual_seed(1234))
"""A fixed random projection: an image's class is its argmax, a task the CNN can learn."""


class TinyCNN(nn.Module):
    """Image classification (ResNet-18 / ResNet-50 stand-in) on 3x16x16 images."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(3, width, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(width, width, 3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(width, 10),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class TinyLM(nn.Module):
    """Next-token prediction with an LSTM (LM stand-in)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 32)
        self.lstm = nn.LSTM(32, 32, batch_first=True)
        self.head = nn.Linear(32, VOCAB)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(self.embed(x))
        return self.head(out)


class TinyTransformer(nn.Module):
    """A one-layer encoder predicting each token's successor (Transformer stand-in)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 32)
        self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 2, 64, batch_first=True), 1)
        self.head = nn.Linear(32, VOCAB)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(self.embed(x)))


class TinyRecommender(nn.Module):
    """Rating prediction from user and item embeddings (Recommendation stand-in)."""

    def __init__(self) -> None:
        super().__init__()
        self.users, self.items = nn.Embedding(1000, 16), nn.Embedding(1000, 16)
        self.mlp = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp(torch.cat([self.users(x[:, 0]), self.items(x[:, 1])], dim=1)).squeeze(1)


MODELS = {
    "ResNet-18": lambda: TinyCNN(8),
    "ResNet-50": lambda: TinyCNN(16),
    "LM": TinyLM,
    "Transformer": TinyTransformer,
    "Recommendation": TinyRecommender,
}


def build(family: str) -> nn.Module:
    if family not in MODELS:
        raise SystemExit(f"unknown family {family!r}; known: {', '.join(MODELS)}")
    return MODELS[family]()


def batch(family: str, size: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, Any]:
    """Synthetic inputs, targets and the loss for them."""
    if family.startswith("ResNet"):
        x = torch.randn(size, 3, 16, 16, generator=generator)
        return x, (x.flatten(1) @ LABELS).argmax(dim=1), nn.CrossEntropyLoss()
    if family == "Recommendation":
        x = torch.randint(0, 1000, (size, 2), generator=generator)
        return x, ((x[:, 0] + x[:, 1]) % 5).float(), nn.MSELoss()
    x = torch.randint(0, VOCAB, (size, SEQUENCE + 1), generator=generator)
    loss = nn.CrossEntropyLoss()
    return x[:, :-1], x[:, 1:], lambda out, y: loss(out.reshape(-1, VOCAB), y.reshape(-1))


def learning_rate(family: str, batch_size: int) -> float:
    """Linear scaling from the family's smallest template batch size."""
    return BASE_LR * batch_size / catalog_family(family).template_batch_sizes[0]


def rendezvous(rank: int, world: int) -> dist.TCPStore:
    """The gang's store, listening on the master's address only (loopback in a local run): torch's own listener
    would take every interface. The other members connect once it listens: torch's client, started before the
    master, backs off and connects up to 0.7 s after it is up (most of a warm gang's start-up)."""
    address, port = os.environ["SHOCKWAVE_MASTER_ADDR"], int(os.environ["SHOCKWAVE_MASTER_PORT"])
    if rank > 0:
        _wait_listening(address, port)
        return dist.TCPStore(address, port, world, is_master=False)
    listener = socket.create_server((address, port))
    return dist.TCPStore(address, port, world, is_master=True, master_listen_fd=listener.detach())


def _wait_listening(address: str, port: int, give_up_s: float = 300.0) -> None:
    """Return once a connection to `address:port` succeeds (or after `give_up_s`: the store's own timeout then
    reports the failure)."""
    end, pause = time.monotonic() + give_up_s, 0.002
    while time.monotonic() < end:
        try:
            with socket.create_connection((address, port), timeout=1.0):
                return
        except OSError:
            time.sleep(pause)
            pause = min(2 * pause, 0.05)


def train(family: str, seed: int, mode: str) -> None:
    """Train `family` for the current lease: from the job's checkpoint when it has one, until the lease says stop. A
    gang member's process ends here (`_leave`)."""
    lease = client.current()
    rank, world = lease.rank, lease.world_size
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    if world > 1:
        dist.init_process_group("gloo", store=rendezvous(rank, world), rank=rank, world_size=world)
    model = build(family)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(params, lr=learning_rate(family, lease.batch_size))
    state, start = _restored(lease, family, mode, model, optimizer)
    ctl = adaptive.controller(mode, state["initial_batch_size"], catalog_family(family).max_batch_size)
    if "controller" in state:
        ctl.load_state_dict(state["controller"])
    state["starts"].append({"step": start, "batch_size": lease.batch_size, "pid": os.getpid(), "time": time.time()})
    if rank == 0:
        print(f"{family}: from step {start} of {lease.total_steps} at batch size {lease.batch_size}", flush=True)
    per_rank = max(1, lease.batch_size // world)
    pieces = 2 if ctl.needs_small_gradients and world == 1 and per_rank > 1 else 1
    checkpoint = _Checkpoint(lease, family, model, optimizer, ctl, state)
    for step in lease.steps(start=start, agree=agree if world > 1 else None):
        generator = torch.Generator().manual_seed(hash((seed, step, rank)) % (2**63))
        x, y, loss_fn = batch(family, per_rank, generator)
        loss, stats = gradients(model, params, loss_fn, x, y, pieces, world)
        checkpoint.last_loss = loss
        if not math.isfinite(loss):
            raise RuntimeError(f"{family}: the loss is {loss} at step {step} (batch size {lease.batch_size})")
        optimizer.step()
        ctl.observe(stats)
        state["samples"] += lease.batch_size
        done = step + 1
        if done % lease.epoch_steps == 0 and done < lease.total_steps:
            wanted = ctl.epoch_end(lease.batch_size)
            if wanted != lease.batch_size:
                checkpoint.save(done)
                lease.request_batch_size(wanted)
                continue
        if lease.checkpoint_due():
            checkpoint.save(done)
    if lease.done:
        state["completions"] += 1
    checkpoint.save(lease.step)
    if world > 1:
        dist.barrier()  # nobody tears the group down while a peer still uses it (gloo aborts a member otherwise)
        dist.destroy_process_group()
        _leave()


def _leave() -> NoReturn:
    """End a gang member without the interpreter's shutdown, its work all written. With torch 2.13, a member whose
    group was destroyed still died at shutdown now and then ('terminate called without an active exception',
    SIGABRT: a thread of c10d's left joinable), about one lease in ten with Ray busy beside it."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _restored(
    lease: client.Lease, family: str, mode: str, model: nn.Module, optimizer: torch.optim.Optimizer
) -> tuple[dict[str, Any], int]:
    """The job's state and the step it goes on from: a fresh start, or its checkpoint's model and optimizer (at the
    lease's batch size's learning rate) so that a restarted job continues where it stopped."""
    state: dict[str, Any] = {
        "step": 0,
        "starts": [],
        "completions": 0,
        "samples": 0,
        "mode": mode,
        "initial_batch_size": lease.batch_size,
    }
    if not lease.checkpoint_path.exists():
        return state, 0
    state = torch.load(lease.checkpoint_path, weights_only=True)  # tensors and plain data: nothing is unpickled
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    for group in optimizer.param_groups:
        group["lr"] = learning_rate(family, lease.batch_size)
    # At a new batch size the scheduler converted the step count (same epochs done); it says where to go on.
    return state, state["step"] if state["batch_size"] == lease.batch_size else lease.resume_step


def agree(stop: bool) -> bool:
    """Whether any member of the gang wants to stop: all members then stop at the same step, none left waiting."""
    flag = torch.tensor([1.0 if stop else 0.0])
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())


@dataclass
class _Checkpoint:
    """What the job saves to resume from, and the last loss to report with it; only rank 0 writes."""

    lease: client.Lease
    family: str
    model: nn.Module
    optimizer: torch.optim.Optimizer
    ctl: adaptive.Controller
    state: dict[str, Any]
    last_loss: float = math.nan

    def save(self, step: int) -> None:
        """Write the checkpoint atomically (a crash leaves the previous one) and tell the lease it is there."""
        if self.lease.rank != 0:
            return
        self.state.update(
            model=self.model.state_dict(),
            optimizer=self.optimizer.state_dict(),
            controller=self.ctl.state_dict(),
            step=step,
            batch_size=self.lease.batch_size,
            family=self.family,
        )
        temporary = self.lease.checkpoint_path.with_suffix(".tmp")
        torch.save(self.state, temporary)
        os.replace(temporary, self.lease.checkpoint_path)
        self.lease.checkpointed(step)
        print(f"step {step}: checkpoint saved (loss {self.last_loss:.4f})", flush=True)


def gradients(
    model: nn.Module,
    params: list[nn.Parameter],
    loss_fn: Any,
    x: torch.Tensor,
    y: torch.Tensor,
    pieces: int,
    world: int,
) -> tuple[float, adaptive.StepGradients]:
    """Set every parameter's gradient to the gang's average; measure per-piece norms on the way (for GNS).

    Data parallelism is a flattened all-reduce of the local gradient: the local gradients (per worker, or per
    micro-batch on one worker) are exactly the "small batch" gradients the noise-scale estimate needs.
    """
    local: list[torch.Tensor] = []
    sizes: list[int] = []
    loss_sum = 0.0
    for part_x, part_y in zip(torch.tensor_split(x, pieces), torch.tensor_split(y, pieces), strict=True):
        model.zero_grad(set_to_none=False)
        loss = loss_fn(model(part_x), part_y)
        loss.backward()
        local.append(torch.cat([p.grad.reshape(-1) for p in params]))
        sizes.append(len(part_x))
        loss_sum += loss.item() * len(part_x)
    samples = sum(sizes)
    gradient = sum(g * (n / samples) for g, n in zip(local, sizes, strict=True))
    small_sq = sum(float(g.pow(2).sum()) for g in local) / len(local)
    packed = torch.cat([gradient, torch.tensor([small_sq, loss_sum / samples])])
    if world > 1:
        dist.all_reduce(packed)
        packed /= world
    gradient, small_sq, loss_value = packed[:-2], float(packed[-2]), float(packed[-1])
    offset = 0
    for p in params:
        p.grad.copy_(gradient[offset : offset + p.numel()].view_as(p))
        offset += p.numel()
    stats = adaptive.StepGradients(gradient, small_sq, samples / len(local), samples * world)
    return loss_value, stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", required=True, help="ResNet-18, ResNet-50, LM, Transformer or Recommendation")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mode", default="static", choices=adaptive.MODES, help="how the job sizes its batches")
    args = parser.parse_args()
    train(args.family, args.seed, args.mode)


if __name__ == "__main__":
    main()
