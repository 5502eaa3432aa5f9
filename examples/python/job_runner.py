"""A plain asyncio job runner with its own retry loop: each job's booking happens once.

Each job books one line in a ledger file (the side effect, counted where it happens) through
Idemgate's ``ledger.record`` (declared ``runs: client``), keyed by the job's id, then notifies a
slow service. The runner gives each attempt a deadline (``asyncio.wait_for``) and retries a job that
timed out, as job runners do:

- ``job-1`` goes through at once;
- ``job-2``'s notification hangs on the first attempt: the runner times it out and runs the job
  again; the booking is replayed (the stored entry), not made again;
- ``job-3``'s booking hangs after it has written its line: the deadline cancels it while it runs,
  so Idemgate holds the key as *unknown* (it may have happened), and the retry is refused with
  ``OutcomeUnknownError``: the runner leaves the job to an operator instead of booking it twice.

Run with a server up (``npm start``): ``IDEMGATE_URL=http://localhost:3000 IDEMGATE_TOKEN=idg_...
PYTHONPATH=clients/python python3 examples/python/job_runner.py``. ``EXAMPLE_LEDGER_FILE`` names the
ledger, ``EXAMPLE_JOB_TIMEOUT`` the deadline of an attempt in seconds. Prints one JSON line.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import uuid
from typing import Any

from idemgate import AsyncIdemgate, OutcomeUnknownError, idempotent

LEDGER = os.environ.get("EXAMPLE_LEDGER_FILE") or os.path.join(tempfile.gettempdir(), "idemgate-jobs-ledger.jsonl")
BATCH = os.environ.get("EXAMPLE_BATCH_ID") or uuid.uuid4().hex[:8]
TIMEOUT = float(os.environ.get("EXAMPLE_JOB_TIMEOUT", "10"))

gate = AsyncIdemgate(os.environ["IDEMGATE_URL"], os.environ["IDEMGATE_TOKEN"], session=f"jobs-{BATCH}")
attempts: dict[str, int] = {}
never = asyncio.Event()  # a service that never answers


@idempotent(
    gate,
    tool="ledger.record",
    key=lambda job_id, **_: f"job-{BATCH}-{job_id}",
    arguments=lambda job_id, account, amount_cents: {"account": account, "amountCents": amount_cents, "currency": "EUR", "memo": job_id},
)
async def book(job_id: str, account: str, amount_cents: int) -> dict[str, Any]:
    entry = {"entryId": f"ent_{uuid.uuid4().hex[:10]}", "job": job_id, "amountCents": amount_cents}
    fd = os.open(LEDGER, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(entry) + "\n").encode())
    finally:
        os.close(fd)
    if job_id == "job-3":
        await never.wait()  # written, then stuck: the deadline cancels it here
    return entry


async def notify(job_id: str, entry: dict[str, Any]) -> None:
    if job_id == "job-2" and attempts[job_id] == 1:
        await never.wait()


async def run_job(job: dict[str, Any]) -> dict[str, Any]:
    entry = await book(job["id"], job["account"], job["amountCents"])
    await notify(job["id"], entry)
    return entry


async def run_all(jobs: list[dict[str, Any]], max_attempts: int = 3) -> list[dict[str, Any]]:
    report = []
    for job in jobs:
        row: dict[str, Any] = {"job": job["id"], "attempts": 0}
        for attempt in range(1, max_attempts + 1):
            attempts[job["id"]] = attempt
            row["attempts"] = attempt
            try:
                row["entry"] = await asyncio.wait_for(run_job(job), TIMEOUT)
                row["outcome"] = "done"
                break
            except asyncio.TimeoutError:
                row["outcome"] = "timed out"
                continue  # the job runs again: the booking is replayed or refused, never made twice
            except OutcomeUnknownError:
                row["outcome"] = "held: an operator decides"
                break
        report.append(row)
    return report


async def main() -> None:
    jobs = [{"id": f"job-{n}", "account": f"acct-{n}", "amountCents": n * 100} for n in (1, 2, 3)]
    async with gate:
        report = await run_all(jobs)
    print(json.dumps({"example": "jobs", "batch": BATCH, "jobs": report}))


if __name__ == "__main__":
    asyncio.run(main())
