"""Model placement throughput, measured (issue 27): `make model-throughput` (`python3 tests/harness model-throughput`),
outside CI.

One set of files (MODEL_THROUGHPUT_FILES files of MODEL_THROUGHPUT_MIB MiB of random bytes, plus a config.json, as a
sharded checkpoint is laid out) is placed from local origins on this machine's loopback, each run into a new store
under .cache, and the same files are fetched by the tools made for each protocol, in one run, alternating:

- HTTP: the origin is Python's ThreadingHTTPServer sending files with sendfile(2). vllm_model_fetch places the file list
  (sha256 pinned, vllm_model_download_workers files at once, each hashed as it arrives, fsynced before the state
  names it) against curl fetching the same URLs with `--parallel --parallel-max <workers>` (no hashing, no fsync).
- S3: moto's S3 server (tests/stand_ins/s3_origin.py, the tests' S3 origin; AWS is unreachable here).
  vllm_model_fetch places the prefix against boto3's own transfer manager (`download_file` per file, the files on
  <workers> threads), with the same client settings.

The module runs as Ansible runs it: a new Python process with its arguments in a JSON file. Each measurement is
MODEL_THROUGHPUT_REPEATS runs (default 3); the median wall time counts. The ratio is reference time / placement time
(1.0: as fast as the protocol's own tool; the goal is 0.9 or more); a second ratio takes the reference with its files
fsynced, the least a placement adds (it records no bytes that are not on disk), a third the reference fsynced and
every file hashed by `openssl dgst -sha256` (<workers> at once): the work a placement does, by the tools made for it. Results:
.cache/model-throughput/ (markdown and JSON), and the table printed. MODEL_THROUGHPUT_SOURCES=http (or s3) measures
one protocol only.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from harness.machine import CACHE_DIR, REPO_ROOT, link_collection, log

RESULTS_DIR = CACHE_DIR / "model-throughput"
MODULE = "ansible_collections.arm_inference.vllm.plugins.modules.vllm_model_fetch"
KEYS = {"access_key_id": "AKIAMODELTHROUGHPUT", "secret_access_key": "model-throughput-secret"}
BUCKET = "throughput"


def make_files(root, count, mib):
    """count shards of mib MiB of random bytes and a config.json; returns {name: sha256}."""
    import hashlib

    os.makedirs(root, exist_ok=True)
    sums = {}
    config = json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
                         "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 256,
                         "torch_dtype": "float32"}).encode()
    with open(os.path.join(root, "config.json"), "wb") as handle:
        handle.write(config)
    sums["config.json"] = hashlib.sha256(config).hexdigest()
    for index in range(count):
        name = "model-%05d-of-%05d.safetensors" % (index + 1, count)
        digest = hashlib.sha256()
        with open(os.path.join(root, name), "wb") as handle:
            for dummy in range(mib):
                block = os.urandom(1 << 20)
                digest.update(block)
                handle.write(block)
        sums[name] = digest.hexdigest()
    return sums


def run_module(arguments, work):
    """vllm_model_fetch in a new Python, as Ansible runs a module; returns (seconds, result)."""
    path = os.path.join(work, "args.json")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump({"ANSIBLE_MODULE_ARGS": arguments}, handle)
    environment = dict(os.environ, PYTHONPATH=str(CACHE_DIR / "collections"))
    started = time.monotonic()
    run = subprocess.run([sys.executable, "-m", MODULE, path], capture_output=True, text=True, env=environment,
                         check=False)
    seconds = time.monotonic() - started
    lines = run.stdout.strip().splitlines()
    result = json.loads(lines[-1]) if lines else {"failed": True, "msg": run.stderr[-2000:]}
    if result.get("failed"):
        raise RuntimeError("vllm_model_fetch failed: %s" % result.get("msg"))
    return seconds, result


def timed(function, target, workers):
    """(seconds of function(), seconds until every file under target is also on disk, fsynced as a placement does,
    seconds until then with every file also hashed by `openssl dgst -sha256` (OpenSSL's SHA-256, as Python's hashlib;
    coreutils' sha256sum is several times slower), <workers> files at once: the work a placement does, by the tools
    made for it)."""
    started = time.monotonic()
    function()
    plain = time.monotonic() - started
    names = [os.path.join(target, name) for name in sorted(os.listdir(target))]
    for name in names:
        descriptor = os.open(name, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
    durable = time.monotonic() - started
    hashing = time.monotonic()
    subprocess.run(["xargs", "-0", "-P", str(workers), "-n", "1", "openssl", "dgst", "-sha256"],
                   input="\0".join(names).encode(),
                   stdout=subprocess.DEVNULL, check=True)
    return plain, durable, durable + time.monotonic() - hashing


def fresh(path):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return str(path)


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Python's static file handler, sending each file with sendfile(2) as production origins do (nginx, a CDN):
    http.server copies through Python in 64 KiB blocks, which took a CPU of this 2-CPU machine from both clients."""

    def log_message(self, *args):
        pass

    def copyfile(self, source, outputfile):
        outputfile.flush()
        self.connection.sendfile(source)


def measure(label, ours, reference, repeats):
    """Alternating runs of both; the medians and their ratios: to the tool alone, and to the tool with its files
    fsynced (what a placement must add at least: it never records bytes that are not on disk)."""
    times = {"placement": [], "reference": [], "durable": [], "same_work": []}
    for dummy in range(repeats):
        times["placement"].append(ours())
        plain, durable, same_work = reference()
        times["reference"].append(plain)
        times["durable"].append(durable)
        times["same_work"].append(same_work)
    medians = dict((key, statistics.median(values)) for key, values in times.items())
    row = dict(("%s_s" % key, [round(value, 2) for value in values]) for key, values in times.items())
    row.update(("%s_median_s" % key, round(value, 2)) for key, value in medians.items())
    row.update(source=label, ratio=round(medians["reference"] / medians["placement"], 3),
               ratio_durable=round(medians["durable"] / medians["placement"], 3),
               ratio_same_work=round(medians["same_work"] / medians["placement"], 3))
    log("%s: placement %s s, reference %s s (fsynced %s s, and hashed %s s), ratio %.3f (to the fsynced reference "
        "%.3f, to the same work %.3f)" % (label, row["placement_s"], row["reference_s"], row["durable_s"],
                                          row["same_work_s"], row["ratio"], row["ratio_durable"],
                                          row["ratio_same_work"]))
    return row


def http_rows(files, sums, work, workers, repeats):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=files))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = "http://127.0.0.1:%d/" % server.server_address[1]
    try:
        def ours():
            store = fresh(os.path.join(work, "store"))
            seconds, dummy = run_module({"store": store, "name": "bench", "source": url, "sha256": sums,
                                         "min_free_disk_gib": 0, "workers": workers}, work)
            return seconds

        def curl():
            target = fresh(os.path.join(work, "curl"))
            argv = ["curl", "--no-progress-meter", "--fail", "--parallel", "--parallel-max", str(workers)]
            for name in sorted(sums):
                argv += ["--output", os.path.join(target, name), url + name]
            return timed(lambda: subprocess.run(argv, check=True), target, workers)

        return measure("HTTP (curl --parallel-max %d)" % workers, ours, curl, repeats)
    finally:
        server.shutdown()


def s3_rows(files, sums, work, workers, repeats):
    sys.path.insert(0, str(REPO_ROOT / "tests"))
    import boto3
    from botocore.config import Config
    from stand_ins.s3_origin import S3Origin

    origin = S3Origin().start()
    try:
        config = Config(connect_timeout=10, read_timeout=60, retries={"max_attempts": 2, "mode": "standard"})
        client = boto3.session.Session().client(
            "s3", region_name="us-east-1", endpoint_url=origin.endpoint, config=config,
            aws_access_key_id=KEYS["access_key_id"], aws_secret_access_key=KEYS["secret_access_key"])
        client.create_bucket(Bucket=BUCKET)
        for name in sorted(sums):
            client.upload_file(os.path.join(files, name), BUCKET, "model/" + name)

        def ours():
            store = fresh(os.path.join(work, "store"))
            seconds, dummy = run_module(dict(KEYS, store=store, name="bench", source="s3://%s/model" % BUCKET,
                                             sha256=sums, region="us-east-1", endpoint_url=origin.endpoint,
                                             min_free_disk_gib=0, workers=workers), work)
            return seconds

        def transfer_manager():
            target = fresh(os.path.join(work, "boto3"))

            def one(name):
                client.download_file(BUCKET, "model/" + name, os.path.join(target, name))

            def everything():
                with ThreadPoolExecutor(max_workers=workers) as pool:
                    list(pool.map(one, sorted(sums)))
            return timed(everything, target, workers)

        return measure("S3 (boto3 download_file, %d files at once)" % workers, ours, transfer_manager, repeats)
    finally:
        origin.stop()


def model_throughput(_args):
    link_collection(None)
    count = int(os.environ.get("MODEL_THROUGHPUT_FILES", "4"))
    mib = int(os.environ.get("MODEL_THROUGHPUT_MIB", "256"))
    repeats = int(os.environ.get("MODEL_THROUGHPUT_REPEATS", "3"))
    workers = int(os.environ.get("MODEL_THROUGHPUT_WORKERS", "4"))
    work = fresh(RESULTS_DIR / "work")
    files = os.path.join(work, "origin")
    log("making %d files of %d MiB under %s" % (count, mib, files))
    sums = make_files(files, count, mib)
    total = sum(os.path.getsize(os.path.join(files, name)) for name in sums)
    sources = os.environ.get("MODEL_THROUGHPUT_SOURCES", "http,s3").split(",")
    rows = [rows_of(files, sums, work, workers, repeats) for name, rows_of in (("http", http_rows), ("s3", s3_rows))
            if name in sources]
    for row in rows:
        row["mib_per_s_placement"] = round(total / (1 << 20) / row["placement_median_s"], 1)
        row["mib_per_s_reference"] = round(total / (1 << 20) / row["reference_median_s"], 1)
    with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
        cpu = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), "unknown")
    report = {"files": count, "mib_each": mib, "bytes": total, "workers": workers, "repeats": repeats,
              "cpu": cpu, "cpus": os.cpu_count(), "rows": rows}
    lines = ["| source | placement s (median) | reference s (median) | reference + fsync s (median) | reference + fsync "
             "+ openssl sha256 s (median) | placement MiB/s | reference MiB/s | ratio | ratio to reference + fsync | ratio "
             "to the same work |", "|---|---|---|---|---|---|---|---|---|---|"]
    lines += ["| %s | %s (%.2f) | %s (%.2f) | %s (%.2f) | %s (%.2f) | %.1f | %.1f | %.3f | %.3f | %.3f |" % (
        row["source"], row["placement_s"], row["placement_median_s"], row["reference_s"], row["reference_median_s"],
        row["durable_s"], row["durable_median_s"], row["same_work_s"], row["same_work_median_s"],
        row["mib_per_s_placement"], row["mib_per_s_reference"], row["ratio"], row["ratio_durable"],
        row["ratio_same_work"]) for row in rows]
    text = "%d files, %d MiB in all, %d at once, %d runs each, %s (%d CPUs)\n\n%s\n" % (
        count + 1, total >> 20, workers, repeats, cpu, os.cpu_count(), "\n".join(lines))
    (RESULTS_DIR / "model-throughput.md").write_text(text)
    (RESULTS_DIR / "model-throughput.json").write_text(json.dumps(report, indent=2) + "\n")
    shutil.rmtree(work, ignore_errors=True)
    print(text)
