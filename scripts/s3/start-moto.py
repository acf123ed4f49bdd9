"""Starts moto's S3 server on 127.0.0.1 with authentication switched on, for the S3 tests.

Usage: .venv-moto/bin/python scripts/s3/start-moto.py
Prints one JSON line {"endpoint", "accessKeyId", "secretAccessKey", "region"} once the server
answers, then serves until stdin closes or SIGTERM. Moto checks no signature by default: an IAM
user with an s3:* policy and an access key are created while auth is still off, then
POST /moto-api/reset-auth switches authentication on for every later request (signatures
verified, IAM policies evaluated).
"""
import json
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import boto3

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
server = subprocess.Popen(
    [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
)
endpoint = f"http://127.0.0.1:{port}"
try:
    for _ in range(600):
        try:
            urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1)
            break
        except Exception:
            if server.poll() is not None:
                raise SystemExit("moto_server exited")
            time.sleep(0.05)
    iam = boto3.client("iam", endpoint_url=endpoint, region_name="us-east-1",
                       aws_access_key_id="bootstrap", aws_secret_access_key="bootstrap")
    iam.create_user(UserName="s3-tests")
    iam.put_user_policy(UserName="s3-tests", PolicyName="s3-all", PolicyDocument=json.dumps(
        {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
    key = iam.create_access_key(UserName="s3-tests")["AccessKey"]
    req = urllib.request.Request(f"{endpoint}/moto-api/reset-auth", data=b"0", method="POST",
                                 headers={"Content-Type": "text/plain"})
    urllib.request.urlopen(req, timeout=5)
    print(json.dumps({"endpoint": endpoint, "accessKeyId": key["AccessKeyId"],
                      "secretAccessKey": key["SecretAccessKey"], "region": "us-east-1"}), flush=True)
    done = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
    import signal
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    while not done.is_set() and server.poll() is None:
        done.wait(0.5)
finally:
    server.terminate()
    try:
        server.wait(5)
    except subprocess.TimeoutExpired:
        server.kill()
