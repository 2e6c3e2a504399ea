"""Molecule scenarios in lanes: the scenarios of a lane run in order, lanes run side by side (the Makefile
gives each scenario a lane of its own); the first lane prints live, the others log
under .cache/logs."""

from __future__ import annotations

import concurrent.futures
import subprocess
import sys
import time

from harness.machine import CACHE_DIR, log


def split_lanes(lanes):
    """[[scenario, ...], ...] from arguments like "site" "engine,rolling_update"; empty lanes dropped."""
    result = [[name for name in lane.split(",") if name] for lane in lanes]
    return [lane for lane in result if lane]


def run_lane(lane, live):
    """molecule test each scenario of a lane in turn, up to the first failure: [(scenario, rc, seconds, log)]."""
    results = []
    for scenario in lane:
        started = time.monotonic()
        command = ["molecule", "test", "-s", scenario]
        if live:
            rc, logfile = subprocess.run(command, check=False).returncode, None
        else:
            logfile = CACHE_DIR / "logs" / ("molecule-%s.log" % scenario)
            logfile.parent.mkdir(parents=True, exist_ok=True)
            with open(logfile, "w", encoding="utf-8") as out:
                rc = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False).returncode
        elapsed = time.monotonic() - started
        results.append((scenario, rc, elapsed, logfile))
        log("scenario %s %s in %.0f s%s" % (scenario, "passed" if rc == 0 else "FAILED (rc %d)" % rc,
                                            elapsed, " (log %s)" % logfile if logfile else ""))
        if rc != 0:
            break
    return results


def run_scenarios(args):
    """Every lane at once: the emulated scenario keeps about one of this machine's two cores busy (one qemu
    host), and much of the native ones is waiting (systemd, /health, apt), so they run beside it."""
    lanes = split_lanes(args.lanes)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(lanes))) as pool:
        futures = [pool.submit(run_lane, lane, index == 0) for index, lane in enumerate(lanes)]
        results = [item for future in futures for item in future.result()]
    for scenario, rc, elapsed, logfile in results:
        if logfile is not None:
            text = logfile.read_text(encoding="utf-8", errors="replace").splitlines()
            shown = text if rc != 0 else text[-40:]
            print("---- molecule %s (%s, %.0f s; %s of %d lines of %s) ----" % (
                scenario, "passed" if rc == 0 else "FAILED", elapsed, "all" if rc != 0 else "last %d" % len(shown),
                len(text), logfile))
            print("\n".join(shown), flush=True)
    failed = [scenario for scenario, rc, elapsed, logfile in results if rc != 0]
    planned = [scenario for lane in lanes for scenario in lane]
    skipped = [scenario for scenario in planned if scenario not in [item[0] for item in results]]
    for scenario, rc, elapsed, logfile in results:
        print("[timing] molecule %s: %.0f s%s" % (scenario, elapsed, "" if rc == 0 else " FAILED"))
    if failed:
        sys.exit("harness: molecule scenario(s) failed: %s%s" % (
            ", ".join(failed), "; not run after a failure in their lane: %s" % ", ".join(skipped) if skipped else ""))
