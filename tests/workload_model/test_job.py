"""A job description is what every driver needs of a trace line, and a catalog line is rebuilt from it."""

from __future__ import annotations

from pathlib import Path

from shockwave.workload_model.catalog import FAMILIES
from shockwave.workload_model.job import Job
from shockwave.workload_model.trace import catalog_job, catalog_line, read_trace, write_trace


def test_a_catalog_line_goes_through_its_description_unchanged(tmp_path: Path) -> None:
    lines = [
        catalog_job("ResNet-50", 64, 4, 5004, "gns", 12.0, duration=900),
        catalog_job("LM", 20, 1, 1500, "static", 30.5),
    ]
    written = tmp_path / "a.trace"
    write_trace(lines, written)
    jobs = [line.job() for line in read_trace(written)]
    assert jobs[0] == Job("ResNet-50", 64, 4, 5004, 12.0, "gns", duration=900)
    rewritten = tmp_path / "b.trace"
    write_trace([catalog_line(job) for job in jobs], rewritten)
    assert rewritten.read_bytes() == written.read_bytes()


def test_a_description_keeps_weight_and_slo_but_no_launch_details() -> None:
    job = Job("Transformer", 32, 2, 4000, 5.0, "accordion", priority_weight=3.0, slo=1.5, duration=600)
    line = catalog_line(job)
    assert (line.priority_weight, line.slo, line.duration, line.total_steps) == (3.0, 1.5, 600, 4000)
    assert line.job() == job
    assert not hasattr(job, "command") and line.command == FAMILIES["Transformer"].launch_command(32)
