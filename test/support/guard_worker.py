"""One process calling a guarded function through the Python client, for the multi-process fault tests.

Environment: IDEMGATE_URL, IDEMGATE_TOKEN, KEY, ACCOUNT, LEDGER (a file: one line appended per
effect), MODE (ok | crash | crash_before | throw | not_applied), DELAY_MS (how long the function runs after its
effect), FLUSH_TIMEOUT (optional: the client's flush_timeout), MAX_ATTEMPTS (optional: requests per API call). Prints one JSON line: whether the
function ran here, the result or the error.
"""

import json
import os
import signal
import sys
import time

from idemgate import Idemgate, IdemgateError, NotAppliedError, RetryPolicy

state = {"ran": False}
mode = os.environ.get("MODE", "ok")


def effect(args):
    if mode == "not_applied":
        raise NotAppliedError("the service refused the connection: nothing happened")
    # killed after the reservation, before the effect: the key is held (stuck) though nothing happened
    if mode == "crash_before":
        os.kill(os.getpid(), signal.SIGKILL)
    state["ran"] = True
    fd = os.open(os.environ["LEDGER"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps({"lang": "python", "pid": os.getpid()}) + "\n").encode())
    finally:
        os.close(fd)
    time.sleep(int(os.environ.get("DELAY_MS", "0")) / 1000)
    if mode == "crash":
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "throw":
        raise ConnectionResetError("the answer was lost after the effect")
    return {"by": "python", "pid": os.getpid()}


# FLUSH_TIMEOUT (seconds): how long a normal exit waits for a completion the gateway could not take
# yet (the client's flush_timeout); only passed when given, so clients without it run the other cases
extra = {"flush_timeout": float(os.environ["FLUSH_TIMEOUT"])} if os.environ.get("FLUSH_TIMEOUT") else {}
# MAX_ATTEMPTS: requests per API call (the client's retry policy), for runs where the gateway goes away
if os.environ.get("MAX_ATTEMPTS"):
    extra["retry"] = RetryPolicy(max_attempts=int(os.environ["MAX_ATTEMPTS"]))
client = Idemgate(os.environ["IDEMGATE_URL"], os.environ["IDEMGATE_TOKEN"], timeout=30, wait_seconds=20, **extra)
args = {"account": os.environ["ACCOUNT"], "amountCents": 100, "currency": "EUR"}
try:
    body = client.guard("ledger.record", args, effect, key=os.environ["KEY"])
    print(json.dumps({"lang": "python", "ran": state["ran"], "outcome": "ran" if state["ran"] else "replayed", "body": body}))
except IdemgateError as err:
    print(json.dumps({"lang": "python", "ran": state["ran"], "outcome": type(err).__name__, "status": err.status, "type": err.type}))
sys.stdout.flush()
