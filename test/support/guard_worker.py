"""One process calling a guarded function through the Python client, for the multi-process fault tests.

Environment: IDEMGATE_URL, IDEMGATE_TOKEN, KEY, ACCOUNT, LEDGER (a file: one line appended per
effect), MODE (ok | crash | throw | not_applied), DELAY_MS (how long the function runs after its
effect). Prints one JSON line: whether the function ran here, the result or the error.
"""

import json
import os
import signal
import sys
import time

from idemgate import Idemgate, IdemgateError, NotAppliedError

state = {"ran": False}
mode = os.environ.get("MODE", "ok")


def effect(args):
    if mode == "not_applied":
        raise NotAppliedError("the service refused the connection: nothing happened")
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


client = Idemgate(os.environ["IDEMGATE_URL"], os.environ["IDEMGATE_TOKEN"], timeout=30, wait_seconds=20)
args = {"account": os.environ["ACCOUNT"], "amountCents": 100, "currency": "EUR"}
try:
    body = client.guard("ledger.record", args, effect, key=os.environ["KEY"])
    print(json.dumps({"lang": "python", "ran": state["ran"], "outcome": "ran" if state["ran"] else "replayed", "body": body}))
except IdemgateError as err:
    print(json.dumps({"lang": "python", "ran": state["ran"], "outcome": type(err).__name__, "status": err.status, "type": err.type}))
sys.stdout.flush()
