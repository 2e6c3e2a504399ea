"""What the collection's benchmarks (p1_rerun.py, p2_fanout.py) share: throw-away systemd containers
and timed ansible-playbook runs against them.

Containers, playbook commands and image names come from the test harness,
tests/harness, so a benchmark provisions exactly what the container tests provision.
Playbooks run with the repository's ansible.cfg (the settings an operator of this checkout gets,
profile_tasks included), and their full output is kept in the work directory.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
# A script, not a pytest run: the test harness (tests/harness) is importable once tests/ is on the path.
sys.path.insert(0, str(REPO_ROOT / "tests"))

# pylint: disable=wrong-import-position
import harness  # noqa: E402
from harness.containers import BUILD_SETUP, Container, boot, playbook_command  # noqa: E402

PLAYBOOKS = REPO_ROOT / "playbooks"
RECAP_LINE = re.compile(r"^(?P<host>\S+)\s+:\s+(?P<counts>(?:\w+=\d+\s*)+)$")
PROFILE_LINE = re.compile(r"^(?P<task>.+?) -{2,} (?P<seconds>\d+\.\d+)s$")
SLOWEST_TASKS = 10

__all__ = ["BUILD_SETUP", "BenchmarkFailure", "Workspace", "parse_arguments", "print_table", "ratio", "run_benchmark"]


class BenchmarkFailure(Exception):
    """A run that failed or a figure that is wrong: the benchmark exits non-zero with this message."""


@dataclass
class PlaybookRun:
    label: str
    seconds: float
    recap: dict
    slowest: list = field(default_factory=list)
    log: Path | None = None

    def total(self, counter):
        return sum(counts.get(counter, 0) for counts in self.recap.values())


def parse_recap(output):
    """Per host, the PLAY RECAP counters (ok, changed, failed, ...) of one ansible-playbook run."""
    lines = output.splitlines()
    try:
        start = max(index for index, line in enumerate(lines) if line.startswith("PLAY RECAP"))
    except ValueError:
        raise BenchmarkFailure("no PLAY RECAP in the output") from None
    recap = {}
    for line in lines[start + 1:]:
        match = RECAP_LINE.match(line.strip())
        if not match:
            break
        recap[match.group("host")] = {key: int(value) for key, value in re.findall(r"(\w+)=(\d+)", match.group("counts"))}
    if not recap:
        raise BenchmarkFailure("PLAY RECAP lists no host")
    return recap


def parse_slowest_tasks(output):
    """profile_tasks' closing summary, slowest first: [(task, seconds)]."""
    tasks = [(match.group("task").strip(), float(match.group("seconds")))
             for match in (PROFILE_LINE.match(line) for line in output.splitlines()) if match]
    return sorted(tasks, key=lambda task: -task[1])[:SLOWEST_TASKS]


def ratio(numerator, denominator):
    return numerator / denominator if denominator else float("inf")


def parse_arguments(description):
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arch", choices=["arm64", "amd64"], default="arm64",
                        help="container architecture: arm64 (the issue's aarch64; emulated on x86_64) or amd64 (native here)")
    parser.add_argument("--keep", action="store_true", help="leave the containers and the work directory in place")
    return parser.parse_args()


def say(message):
    print("[bench] %s" % message, flush=True)


def print_table(header, rows):
    widths = [max(len(str(row[column])) for row in [header] + rows) for column in range(len(header))]
    for row in [header, ["-" * width for width in widths]] + rows:
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip())


class Workspace:
    """A work directory plus the containers started in it; removed on exit unless --keep."""

    def __init__(self, arch, keep):
        self.arch = arch
        self.keep = keep
        self.image = harness.image_tag("debian12-%s" % arch)
        self.directory = Path(tempfile.mkdtemp(prefix="arm-inference-bench-", dir="/var/tmp"))
        self.containers = []

    def __enter__(self):
        if self.arch != harness.native_arch():
            # A container's systemd can flush binfmt_misc (see harness.build_image); register qemu again.
            harness.ensure_binfmt()
        say("work directory %s, image %s" % (self.directory, self.image))
        return self

    def __exit__(self, exc_type, exc, traceback):
        if self.keep:
            say("kept: %s and containers %s" % (self.directory, " ".join(host.name for host in self.containers)))
            return
        for host in self.containers:
            host.remove()
        if exc_type is None:
            shutil.rmtree(self.directory, ignore_errors=True)
        else:
            say("playbook logs kept in %s" % self.directory)

    def subdirectory(self, name):
        path = self.directory / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def start_hosts(self, count, options=(), fixture_repo=False):
        """`count` booted systemd containers; with `fixture_repo`, each holds the fixture vLLM repository
        (tests/fixtures) that BUILD_SETUP and molecule's group_vars build from."""
        hosts = []
        for dummy in range(count):
            host = Container(self.image, systemd=True, options=options)
            self.containers.append(host)
            boot(host)
            state = host.exec("systemctl is-system-running").stdout.strip()
            if state not in ("running", "degraded"):
                raise BenchmarkFailure("%s did not finish booting (systemd is %r)" % (host.name, state))
            if fixture_repo:
                harness.stage_fixture_repo(host.name, self.subdirectory("fixture-%s" % host.name))
            hosts.append(host)
        return hosts

    def remove(self, hosts):
        if self.keep:
            return
        for host in hosts:
            host.remove()
            self.containers.remove(host)

    def run_playbook(self, hosts, playbook, variables, label, run_directory, fail_on_error=True):
        """Run playbooks/`playbook` against `hosts` (inventory group vllm_hosts, plus whatever group_vars
        lies in `run_directory`), timed from start to exit."""
        command, env = playbook_command(hosts, run_directory, str(PLAYBOOKS / playbook), variables)
        env.update(ANSIBLE_CONFIG=str(REPO_ROOT / "ansible.cfg"), PROFILE_TASKS_TASK_OUTPUT_LIMIT=str(SLOWEST_TASKS * 3))
        log = run_directory / ("%s.log" % re.sub(r"\W+", "-", label).strip("-"))
        say("%s: %s on %d %s container(s), log %s" % (label, playbook, len(hosts), self.arch, log))
        started = time.monotonic()
        with log.open("w") as handle:
            result = subprocess.run(command, stdout=handle, stderr=subprocess.STDOUT, env=env, cwd=run_directory, check=False)
        seconds = time.monotonic() - started
        output = log.read_text(errors="replace")
        if result.returncode != 0 and fail_on_error:
            raise BenchmarkFailure("%s: ansible-playbook exited %d after %.0f s; end of %s:\n%s"
                                   % (label, result.returncode, seconds, log, "\n".join(output.splitlines()[-40:])))
        say("%s: %.1f s" % (label, seconds))
        return PlaybookRun(label, seconds, parse_recap(output), parse_slowest_tasks(output), log)


def run_benchmark(benchmark):
    """Call `benchmark()`; a BenchmarkFailure becomes a message and exit status 1."""
    try:
        benchmark()
    except BenchmarkFailure as failure:
        print("FAILED: %s" % failure, file=sys.stderr, flush=True)
        sys.exit(1)
