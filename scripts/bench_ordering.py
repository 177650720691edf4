#!/usr/bin/env python3
"""Drives one `tern serve` for scripts/bench-ordering.sh (standard library only).

  bench_ordering.py rapid URL MASTER APP_KEY CONTROL DEVICES PUSHES SENDERS
      registers DEVICES devices (alias user-N), sets the simulator's latency to 0-50 ms, sends PUSHES pushes to each
      device as fast as they are accepted (each with badge "+1" and an inbox message; SENDERS clients, each sending
      one device's pushes back to back), waits until the simulator has them all, then counts badge inversions per device
      in the simulator's arrival log and checks every message is in its user's inbox.
  bench_ordering.py register URL APP_KEY COUNT TAG
      registers COUNT devices with TAG.
  bench_ordering.py push URL MASTER TAG
      one push to TAG, timed from the request to its completed answer.
Prints one JSON object with the results.
"""
import json
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor


def call(method, url, bearer=None, body=None, timeout=120):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    if bearer:
        request.add_header("Authorization", "Bearer " + bearer)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=timeout) as response:
        text = response.read()
        return response.status, (json.loads(text) if text else None)


def device_id(n):
    return "6f1c1f9e-8d7a-4d44-9d2e-%012x" % n


def token(n):
    return "cd" * 28 + "%08x" % n


def register(url, app_key, numbers, alias=True, tag=None):
    def one(n):
        body = {"token": token(n), "environment": "production"}
        if alias:
            body["alias"] = "user-%d" % n
        if tag:
            body["tags"] = [tag]
        call("PUT", "%s/v1/apps/demo/devices/%s" % (url, device_id(n)), app_key, body)
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(one, numbers))


def arrivals(control):
    items, after = [], 0
    while True:
        _, page = call("GET", "%s/notifications?after=%d&limit=10000" % (control, after))
        if not page["items"]:
            return items
        items += page["items"]
        after = page["next"]


def rapid(url, master, app_key, control, devices, pushes, senders):
    numbers = range(1, devices + 1)
    register(url, app_key, numbers)
    call("PUT", control + "/scenario/latency", body={"minMilliseconds": 0, "maxMilliseconds": 50})
    before = len(arrivals(control))

    def sends(n):
        for index in range(1, pushes + 1):
            call("POST", url + "/v1/apps/demo/pushes", master, {
                "audience": {"devices": [device_id(n)]}, "inbox": {},
                "notification": {"title": "message %d" % index, "badge": "+1"}})

    started = time.monotonic()
    with ThreadPoolExecutor(senders) as pool:
        list(pool.map(sends, numbers))
    created = time.monotonic() - started
    expected = devices * pushes
    got = []
    for _ in range(1200):
        got = arrivals(control)[before:]
        if len(got) >= expected:
            break
        time.sleep(0.25)
    delivered = time.monotonic() - started

    by_token = {}
    for item in got:
        badge = json.loads(item["payload"]).get("aps", {}).get("badge")
        by_token.setdefault(item["token"], []).append(badge)
    inversions = 0
    devices_with_inversions = 0
    duplicates = 0
    for badges in by_token.values():
        bad = sum(1 for a, b in zip(badges, badges[1:]) if b is None or a is None or b <= a)
        inversions += bad
        devices_with_inversions += 1 if bad else 0
        duplicates += len(badges) - len(set(badges))

    in_inbox = 0
    def inbox_count(n):
        _, page = call("GET", "%s/v1/apps/demo/inbox?alias=user-%d&limit=1000" % (url, n), master)
        return len(page["messages"])
    with ThreadPoolExecutor(16) as pool:
        in_inbox = sum(pool.map(inbox_count, numbers))
    call("DELETE", control + "/scenario/latency")
    return {
        "devices": devices, "pushesPerDevice": pushes, "arrived": len(got), "expected": expected,
        "inversions": inversions, "devicesWithInversions": devices_with_inversions, "duplicates": duplicates,
        "messagesInInboxes": in_inbox, "secondsToCreate": round(created, 2), "secondsToDeliver": round(delivered, 2),
    }


def main():
    mode = sys.argv[1]
    if mode == "rapid":
        url, master, app_key, control, devices, pushes, senders = sys.argv[2:9]
        print(json.dumps(rapid(url, master, app_key, control, int(devices), int(pushes), int(senders))))
    elif mode == "register":
        url, app_key, count, tag = sys.argv[2:6]
        started = time.monotonic()
        register(url, app_key, range(100_000, 100_000 + int(count)), alias=False, tag=tag)
        print(json.dumps({"registered": int(count), "seconds": round(time.monotonic() - started, 2)}))
    elif mode == "push":
        url, master, tag = sys.argv[2:5]
        started = time.monotonic()
        status, push = call("POST", url + "/v1/apps/demo/pushes?wait=60", master, {
            "audience": {"tags": [tag]}, "notification": {"title": "to everyone", "badge": 1}})
        elapsed = time.monotonic() - started
        print(json.dumps({"status": push["status"], "accepted": push["counts"]["accepted"], "seconds": round(elapsed, 3)}))
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
