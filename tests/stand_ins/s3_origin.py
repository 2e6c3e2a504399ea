"""The S3 origin of the tests: moto's S3 server (the published implementation from PyPI, pinned in
requirements-dev.txt), started on the loopback, since AWS is unreachable from our test machines. The
collection's code runs the REAL boto3 against it. Not a double written here: this file only starts
moto, loads a model into a bucket and switches on moto's IAM enforcement, so an IAM user's policy
decides what is allowed and a request outside it gets S3's own AccessDenied. It never ships in a role.

Credentials stay in this process: the setup client passes them as arguments; the keys of the IAM user
are returned to the test, which hands them to the module as (no_log) arguments.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request

import boto3

REGION = "eu-west-1"
# moto accepts any keys while authentication is off (the setup phase).
_SETUP_KEYS = {"aws_access_key_id": "AKIASETUPSETUPSETUP0", "aws_secret_access_key": "setup-only"}


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class S3Origin:
    def __init__(self, port=None, tls=None, ca_bundle=None, log=None):
        """tls: (certificate, key) files to serve HTTPS with; ca_bundle: what the setup client trusts then; log: a file
        moto's server writes its request log to (werkzeug's, one line a request), for requests()."""
        self.port = port or free_port()
        self.log = log
        self.tls = tls
        self.ca_bundle = ca_bundle
        self.endpoint = "%s://127.0.0.1:%d" % ("https" if tls else "http", self.port)
        self.process = None

    def start(self):
        # moto's own environment: no credentials are in it (moto needs none).
        environment = dict((key, value) for key, value in os.environ.items() if not key.startswith("AWS_"))
        command = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)]
        if self.tls:
            command += ["-c", self.tls[0], "-k", self.tls[1]]
        with open(self.log or os.devnull, "ab") as log:  # appended to across a restart
            self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log, env=environment)
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=2).close()
                return self
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError("moto's S3 server did not start on %s" % self.endpoint)
                time.sleep(0.3)

    def stop(self):
        if self.process:
            self.process.terminate()
            self.process.wait(10)
            self.process = None

    def requests(self):
        """[(method, path)] of every request the server logged (needs log), in order: what a client asked the store."""
        with open(self.log, encoding="utf-8", errors="replace") as log:
            # werkzeug colours some lines (a 206 among them) with terminal escapes, even into a file.
            found = [re.search(r'"([A-Z]+) (\S+) HTTP/[0-9.]+"', re.sub(r"\x1b\[[0-9;]*m", "", line)) for line in log]
        return [(line.group(1), line.group(2)) for line in found if line]

    def client(self, service="s3", **keys):
        return boto3.session.Session().client(service, region_name=REGION, endpoint_url=self.endpoint,
                                              verify=self.ca_bundle, **(keys or _SETUP_KEYS))

    def put_model(self, bucket, prefix, directory, sums=True):
        """Upload every file of directory under s3://bucket/prefix/, with a SHA256SUMS object when sums."""
        s3 = self.client()
        try:
            s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": REGION})
        except s3.exceptions.BucketAlreadyOwnedByYou:
            pass
        lines = []
        for name in sorted(os.listdir(directory)):
            path = os.path.join(directory, name)
            with open(path, "rb") as handle:
                data = handle.read()
            s3.put_object(Bucket=bucket, Key="%s/%s" % (prefix, name), Body=data)
            lines.append("%s  %s\n" % (hashlib.sha256(data).hexdigest(), name))
        if sums:
            s3.put_object(Bucket=bucket, Key="%s/SHA256SUMS" % prefix, Body="".join(lines).encode())

    def reader(self, bucket, prefix):
        """An IAM user allowed to read s3://bucket/prefix/* only; returns its keys."""
        return self.user("model-reader", bucket, prefix, ["s3:GetObject"], list_bucket=False)

    def user(self, name, bucket, prefix, actions, list_bucket=True):
        """An IAM user allowed actions on s3://bucket/prefix/* (and s3:ListBucket on the bucket, as a fleet mirror's
        readers need: without it S3 answers 403 for a missing object); returns its keys."""
        iam = self.client("iam")
        iam.create_user(UserName=name)
        statements = [{"Effect": "Allow", "Action": actions, "Resource": ["arn:aws:s3:::%s/%s/*" % (bucket, prefix)]}]
        if list_bucket:
            statements.append({"Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": ["arn:aws:s3:::%s" % bucket]})
        iam.put_user_policy(UserName=name, PolicyName="models", PolicyDocument=json.dumps({
            "Version": "2012-10-17", "Statement": statements}))
        key = iam.create_access_key(UserName=name)["AccessKey"]
        return {"access_key_id": key["AccessKeyId"], "secret_access_key": key["SecretAccessKey"]}

    def enforce_iam(self):
        """From now on every request is authenticated and authorised against IAM (moto's reset-auth)."""
        request = urllib.request.Request(self.endpoint + "/moto-api/reset-auth", data=b"0", method="POST",
                                         headers={"Content-Type": "text/plain"})
        urllib.request.urlopen(request, timeout=10).read()
