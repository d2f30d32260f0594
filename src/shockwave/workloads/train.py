"""A small real training job per model family, on synthetic data, driven by a shockwave lease.

    python -m shockwave.workloads.train --family ResNet-18

The batch size, step budget and checkpoint path come from the lease (`shockwave.job`). Data for global step s is
drawn from a generator seeded with (seed, step, rank), so a job resumed from a checkpoint continues the very same
stream, on any node. Gangs (`SHOCKWAVE_WORLD_SIZE` > 1) train data-parallel with torch.distributed over gloo, each
member on batch_size / world_size samples. The checkpoint holds model, optimizer, step and batch size, plus the
steps at which the job was (re)started and how often it completed, so a run can be audited afterwards.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from shockwave import job

BASE_LR = 0.01
BASE_BATCH = 32
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


def build(family: str) -> nn.Module:
    models = {
        "ResNet-18": lambda: TinyCNN(8),
        "ResNet-50": lambda: TinyCNN(16),
        "LM": TinyLM,
        "Transformer": TinyTransformer,
        "Recommendation": TinyRecommender,
    }
    if family not in models:
        raise SystemExit(f"unknown family {family!r}; known: {', '.join(models)}")
    return models[family]()


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


def train(family: str, seed: int) -> None:
    lease = job.current()
    rank, world = lease.rank, lease.world_size
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    if world > 1:
        dist.init_process_group(
            "gloo",
            init_method=f"tcp://{os.environ['SHOCKWAVE_MASTER_ADDR']}:{os.environ['SHOCKWAVE_MASTER_PORT']}",
            rank=rank,
            world_size=world,
        )
    model = build(family)
    optimizer = torch.optim.SGD(model.parameters(), lr=BASE_LR * lease.batch_size / BASE_BATCH)
    state: dict[str, Any] = {"step": 0, "starts": [], "completions": 0}
    if lease.checkpoint_path.exists():
        state = torch.load(lease.checkpoint_path, weights_only=False)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        for group in optimizer.param_groups:  # the learning rate follows the batch size (linear scaling)
            group["lr"] = BASE_LR * lease.batch_size / BASE_BATCH
    state["starts"].append(
        {"step": state["step"], "batch_size": lease.batch_size, "pid": os.getpid(), "time": time.time()}
    )
    trained = nn.parallel.DistributedDataParallel(model) if world > 1 else model
    per_rank = max(1, lease.batch_size // world)

    def agree(stop: bool) -> bool:
        flag = torch.tensor([1.0 if stop else 0.0])
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item())

    def save(step: int) -> None:
        if rank != 0:
            return
        state.update(
            model=model.state_dict(),
            optimizer=optimizer.state_dict(),
            step=step,
            batch_size=lease.batch_size,
            family=family,
        )
        temporary = lease.checkpoint_path.with_suffix(".tmp")
        torch.save(state, temporary)
        os.replace(temporary, lease.checkpoint_path)
        lease.checkpointed(step)

    for step in lease.steps(start=state["step"], agree=agree if world > 1 else None):
        generator = torch.Generator().manual_seed(hash((seed, step, rank)) % (2**63))
        x, y, loss_fn = batch(family, per_rank, generator)
        optimizer.zero_grad()
        loss_fn(trained(x), y).backward()
        optimizer.step()
        if lease.checkpoint_due():
            save(step + 1)
    if lease.done:
        state["completions"] += 1
    save(lease.step)
    if world > 1:
        dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", required=True, help="ResNet-18, ResNet-50, LM, Transformer or Recommendation")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    train(args.family, args.seed)


if __name__ == "__main__":
    main()
