"""The console in a real browser (headless Chromium through Selenium) against a real cluster:
the walk from the overview to a produced message, the script that stays inert, a group's lag
and its chart, an offset reset dry run then apply, a search stopped while it runs, read-only
mode, CSRF and the login.
"""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from cluster_testkit import assert_ok, assert_one_line_error, run_strom
from conftest import HttpSession, eventually, text_of
from strom_testkit import wait_until

from strom import Admin, Consumer, NewTopic, Producer, TopicPartition
from strom.serde import SchemaRegistryClient

pytestmark = pytest.mark.integration

SCRIPT = "<script>window.__pwned = 1</script>"
IMG = '<img src=x onerror="window.__pwned = 2">'


def _by() -> Any:
    from selenium.webdriver.common.by import By

    return By


def _create(cluster: Any, name: str, partitions: int = 1) -> None:
    with Admin(cluster.gateway) as admin:
        admin.create_topics([NewTopic(name, partitions, 1)])

        def ready() -> bool:
            described = admin.describe_topics([name])[0]
            return all(p.leader >= 0 for p in described.partitions)

        wait_until(ready, timeout_s=30, what=f"leaders of {name}")


def test_walk_from_overview_to_a_produced_message_whose_script_stays_inert(
    cluster: Any, console: Any, browser: Any
) -> None:
    by, driver = _by(), browser.driver
    _create(cluster, "walk", 2)
    driver.get(console.url + "/")
    assert "127.0.0.1" in text_of(driver, "#active-controller")
    assert len(driver.find_elements(by.CSS_SELECTOR, "#nodes tbody tr")) == 3
    driver.find_element(by.LINK_TEXT, "Topics").click()
    driver.find_element(by.LINK_TEXT, "walk").click()
    assert text_of(driver, "#topic-name") == "walk"
    assert len(driver.find_elements(by.CSS_SELECTOR, "#partitions-table tbody tr")) == 2
    driver.find_element(by.ID, "browse-link").click()
    assert driver.find_elements(by.ID, "no-records")

    driver.get(console.url + "/topics/walk/produce")
    driver.find_element(by.ID, "produce-key").send_keys("k-" + SCRIPT)
    driver.find_element(by.ID, "produce-value").send_keys(SCRIPT)
    driver.find_element(by.ID, "produce-headers").send_keys("origin: " + IMG)
    driver.find_element(by.ID, "produce-button").click()
    assert "Written to partition" in text_of(driver, "#produce-result")
    driver.find_element(by.ID, "see-it").click()
    values = [e.text for e in driver.find_elements(by.CSS_SELECTOR, "pre.record-value")]
    assert values == [SCRIPT]
    assert text_of(driver, "pre.record-key") == "k-" + SCRIPT
    assert text_of(driver, "pre.header-value") == IMG
    assert driver.execute_script("return window.__pwned === undefined")
    assert not driver.find_elements(by.CSS_SELECTOR, "#messages-table script, #messages-table img")
    browser.snap("messages")

    with Producer(cluster.gateway) as producer:  # bytes that are not UTF-8
        producer.send("walk", value=b"\xff\xfebad", partition=1)
        producer.flush()
    driver.get(console.url + "/topics/walk/messages?partition=1&start=latest&page_size=1")
    assert text_of(driver, "pre.record-value") == "\ufffd\ufffdbad"
    assert "not UTF-8" in text_of(driver, "#messages-table .note")
    driver.get(
        console.url + "/topics/walk/messages?partition=1&start=latest&page_size=1&format=hex"
    )
    assert text_of(driver, "pre.record-value") == "ff fe 62 61 64"

    # The overview reports disk use (log dirs) and both controllers; the topic page sizes.
    driver.get(console.url + "/")
    eventually(
        lambda: (
            [e.text[-1] for e in driver.find_elements(by.CSS_SELECTOR, "#nodes td.disk-used")]
            == ["B"] * 3
            and all("% of" in e.text for e in driver.find_elements(by.CSS_SELECTOR, "#nodes td.fs"))
            and text_of(driver, "#used-bytes") not in ("-", "0 B")
        ),
        "every node's disk use to show",
    )
    roles = [e.text for e in driver.find_elements(by.CSS_SELECTOR, "#controllers tr td:last-child")]
    assert sorted(roles) == ["active", "standby"], roles
    eventually(lambda: text_of(driver, "#rate-in").endswith("/s"), "the records-in rate")
    driver.get(console.url + "/topics/walk")
    eventually(lambda: "B" in text_of(driver, "#partitions-table td.size"), "a partition size")
    assert "B/s" in text_of(driver, "#topic-figures")  # sampled bytes in and out


def test_a_groups_lag_appears_after_it_commits_and_the_chart_draws(
    cluster: Any, console: Any, browser: Any
) -> None:
    by, driver = _by(), browser.driver
    _create(cluster, "lagged")
    with Producer(cluster.gateway) as producer:
        for i in range(50):
            producer.send("lagged", value=f"v{i}".encode())
        producer.flush()
    with Consumer(
        bootstrap_servers=cluster.gateway,
        group_id="lagging",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_poll_records=20,
    ) as consumer:
        consumer.subscribe(["lagged"])
        read = 0
        deadline = time.monotonic() + 30
        while read < 20 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500, max_records=20 - read).values():
                read += len(records)
        assert read == 20
        consumer.commit({TopicPartition("lagged", 0): 20})
        driver.get(console.url + "/groups/lagging")  # a member, and what it is assigned
        assert text_of(driver, "#group-state") == "Stable"
        assert "lagged-0" in text_of(driver, "#members-table")
    driver.get(console.url + "/groups")
    driver.find_element(by.LINK_TEXT, "lagging").click()
    eventually(lambda: text_of(driver, "#total-lag") == "30", "the lag of 30 to show")
    assert text_of(driver, "#lag-table td.committed") == "20"
    # The sampler adds a point every 0.5 s; the live refresh redraws the chart.
    eventually(
        lambda: len(driver.find_element(by.ID, "lag-line").get_attribute("points").split()) >= 2,
        "the lag chart to draw a line",
    )
    browser.snap("group")


def test_an_offset_reset_is_previewed_then_applied(
    cluster: Any, console: Any, browser: Any
) -> None:
    by, driver = _by(), browser.driver
    _create(cluster, "resettable")
    with Producer(cluster.gateway) as producer:
        for i in range(10):
            producer.send("resettable", value=f"r{i}".encode())
        producer.flush()
    tp = TopicPartition("resettable", 0)
    with Admin(cluster.gateway) as admin:
        admin.alter_consumer_group_offsets("resetter", {tp: 7})
        driver.get(console.url + "/groups/resetter")
        driver.find_element(by.CSS_SELECTOR, "#reset-strategy option[value=shift]").click()
        driver.find_element(by.ID, "reset-value").send_keys("-5")
        driver.find_element(by.ID, "dry-run-button").click()
        plan = driver.find_element(by.ID, "reset-plan")
        assert plan.get_attribute("data-applied") == "0"
        assert text_of(driver, "#reset-plan td.target") == "2"
        assert admin.list_consumer_group_offsets("resetter")[tp].offset == 7  # only previewed
        driver.find_element(by.ID, "apply-button").click()
        # The dry run's page (data-applied 0) stays until the apply's answer replaces it.
        eventually(
            lambda: driver.find_element(by.ID, "reset-plan").get_attribute("data-applied") == "1",
            "the applied plan to show",
        )
        assert admin.list_consumer_group_offsets("resetter")[tp].offset == 2
    eventually(lambda: text_of(driver, "#lag-table td.committed") == "2", "the new offset")


def test_a_text_search_reports_what_it_scanned(cluster: Any, console: Any, browser: Any) -> None:
    by, driver = _by(), browser.driver
    _create(cluster, "searched", 2)
    with Producer(cluster.gateway) as producer:
        for i in range(200):
            value = b'{"status": "failed"}' if i == 123 else b'{"status": "ok"}'
            producer.send("searched", key=f"k{i}".encode(), value=value)
        producer.flush()
    driver.get(console.url + "/topics/searched/search")
    driver.find_element(by.CSS_SELECTOR, "input[name=mode][value=filter]").click()
    driver.find_element(by.ID, "search-query").send_keys('value.status == "failed"')
    driver.find_element(by.ID, "search-button").click()
    eventually(lambda: text_of(driver, "#search-status") == "done", "the search to end")
    assert text_of(driver, "#search-scanned") == "200"
    keys = [e.text for e in driver.find_elements(by.CSS_SELECTOR, "#search-results pre.record-key")]
    assert keys == ["k123"]
    # A text search bounded to 50 records stops there and says so.
    driver.get(console.url + "/topics/searched/search")
    driver.find_element(by.ID, "search-query").send_keys("status")  # in every value
    limit = driver.find_element(by.NAME, "max_records")
    limit.clear()
    limit.send_keys("50")
    driver.find_element(by.ID, "search-button").click()
    eventually(lambda: text_of(driver, "#search-status") == "limit", "the search to stop at 50")
    assert text_of(driver, "#search-scanned") == "50"
    assert len(driver.find_elements(by.CSS_SELECTOR, "#search-results tr.record")) == 50


def test_a_running_search_stops_when_asked_and_says_what_it_scanned(
    cluster: Any, console: Any, browser: Any
) -> None:
    by, driver = _by(), browser.driver
    _create(cluster, "searched-long", 2)
    total = 600_000  # tiny records: scanning them all takes seconds, far longer than a click
    with Producer(cluster.gateway, linger_ms=5, batch_size=512 * 1024) as producer:
        for p in range(2):
            for _ in range(0, total // 2, 50_000):
                producer.send_many("searched-long", [b"x" * 16] * 50_000, partition=p)
        producer.flush()
    driver.get(console.url + "/topics/searched-long/search")
    driver.find_element(by.ID, "search-query").send_keys("never in any record")
    limit = driver.find_element(by.NAME, "max_records")
    limit.clear()
    limit.send_keys(str(total))
    driver.find_element(by.ID, "search-button").click()
    eventually(lambda: text_of(driver, "#search-status") == "running", "the search to run")

    def click_stop() -> bool:
        driver.find_element(by.CSS_SELECTOR, "#stop-search button").click()
        return True

    eventually(click_stop, "the Stop button")  # the live refresh may be replacing it
    eventually(lambda: text_of(driver, "#search-status") == "stopped", "the search to stop")
    job_url = driver.current_url
    scanned = int(text_of(driver, "#search-scanned").replace(",", ""))
    assert 0 <= scanned < total
    assert not driver.find_elements(by.CSS_SELECTOR, "#stop-search")
    # "stopped" is set by the scan as it ends: the count it shows is final.
    status, body = HttpSession(console.url).get(job_url.removeprefix(console.url))
    assert status == 200
    found = re.search(r'id="search-status">(\w+)<.*id="search-scanned">([0-9,]+)<', body, re.S)
    assert found is not None
    assert (found[1], int(found[2].replace(",", ""))) == ("stopped", scanned)


def test_read_only_hides_every_control_and_refuses_a_forged_change(
    cluster: Any, consoles: Any, browser: Any
) -> None:
    by, driver = _by(), browser.driver
    _create(cluster, "kept")
    read_only = consoles.read_only
    for page in ("/topics", "/topics/kept", "/topics/kept/produce", "/groups/lagging"):
        driver.get(read_only.url + page)
        assert driver.find_elements(by.ID, "read-only-badge")
        forms = driver.find_elements(by.CSS_SELECTOR, "main form[method=post]")
        assert forms == [], f"{page} shows a change control"
    forger = HttpSession(read_only.url)
    assert forger.get("/topics/kept")[0] == 200
    assert forger.token
    status, body = forger.post("/topics/kept/delete", {"confirm": "kept"})
    assert status == 403 and "read-only" in body
    status, _ = forger.post("/topics/kept/produce", {"value": "x"})
    assert status == 403
    with Admin(cluster.gateway) as admin:
        assert "kept" in admin.list_topics()


def test_a_change_without_the_csrf_token_is_refused(cluster: Any, console: Any) -> None:
    _create(cluster, "guarded")
    client = HttpSession(console.url)
    client.get("/topics/guarded")
    status, body = client.post("/topics/guarded/delete", {"confirm": "guarded"}, token=False)
    assert status == 403 and "CSRF" in body
    stranger = HttpSession(console.url)  # another session's token is no good either
    stranger.token = client.token
    status, _ = stranger.post("/topics/guarded/delete", {"confirm": "guarded"})
    assert status == 403
    status, _ = client.post("/topics/guarded/delete", {"confirm": "guarded"})
    assert status == 303
    with Admin(cluster.gateway) as admin:
        wait_until(lambda: "guarded" not in admin.list_topics(), what="guarded deleted")


def test_login_is_required_when_a_user_is_set(consoles: Any) -> None:
    client = HttpSession(consoles.login.url)
    status, _ = client.get("/topics")
    assert status == 303
    client.get("/login")
    assert client.post("/login", {"user": "ops", "password": "wrong"})[0] == 401
    client.get("/login")
    assert client.post("/login", {"user": "ops", "password": "s3cret"})[0] == 303
    status, body = client.get("/topics")
    assert status == 200 and "ops" in body


def test_the_schemas_pages_show_the_registrys_subjects(consoles: Any, browser: Any) -> None:
    by, driver = _by(), browser.driver
    schema = (
        '{"type": "record", "name": "Order", "doc": "</pre><script>window.__pwned = 3</script>",'
    )
    schema += ' "fields": [{"name": "id", "type": "string"}]}'
    with SchemaRegistryClient(consoles.registry.url) as registry:
        registry.register("orders-value", schema)
    driver.get(consoles.main.url + "/")
    driver.find_element(by.LINK_TEXT, "Schemas").click()
    driver.find_element(by.LINK_TEXT, "orders-value").click()
    assert text_of(driver, "#schema-version") == "1"
    assert "</pre><script>" in text_of(driver, "#schema-text")
    assert driver.execute_script("return window.__pwned === undefined")
    driver.get(consoles.read_only.url + "/")
    assert not driver.find_elements(by.LINK_TEXT, "Schemas")  # no registry configured


def test_reassignment_and_preferred_election_from_the_topic_page(
    cluster: Any, console: Any
) -> None:
    _create(cluster, "moved")
    client = HttpSession(console.url)
    assert client.get("/topics/moved")[0] == 200
    with Admin(cluster.gateway) as admin:
        (before,) = admin.describe_topics(["moved"])[0].partitions
        target = next(b for b in (1, 2, 3) if b not in before.replicas)
        status, body = client.post("/topics/moved/reassign", {"plan": f"0: {target}"})
        assert status == 303, body

        def moved() -> bool:
            (p,) = admin.describe_topics(["moved"])[0].partitions
            return p.replicas == (target,) and p.leader == target

        wait_until(moved, timeout_s=60, what="the partition to move")
    status, body = client.post("/topics/moved/reassign", {"plan": "7: 1"})
    assert status == 400 and "no partition 7" in body
    status, _ = client.post("/topics/moved/elect", {})
    assert status == 303
    status, body = client.get("/topics/moved")
    assert status == 200 and f"<td>{target}</td>" in body


def test_an_open_transaction_is_listed_and_hidden_from_read_committed_browsing(
    cluster: Any, console: Any
) -> None:
    _create(cluster, "txns")
    client = HttpSession(console.url)
    page = "/topics/txns/messages?partition=all&start=earliest&page_size=10&isolation="
    with Producer(cluster.gateway, transactional_id="console-txn") as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send("txns", value=b"pending-record")
        producer.flush()
        assert "pending-record" in client.get(page + "read_uncommitted")[1]
        assert "pending-record" not in client.get(page + "read_committed")[1]
        status, body = client.get("/transactions?state=Ongoing")
        assert status == 200 and "console-txn" in body
        status, body = client.get("/transactions/console-txn")
        assert status == 200 and "txns-0" in body
        producer.commit_transaction()
    # The commit markers reach the partition just after the commit returns.
    wait_until(
        lambda: "pending-record" in client.get(page + "read_committed")[1],
        timeout_s=30,
        what="the committed record to show",
    )
    assert client.get("/transactions/nobody")[0] == 404


def test_the_cli_and_the_console_give_the_same_lag_and_reset_plan(
    cluster: Any, console: Any
) -> None:
    """One group, read by ``strom groups`` and by the console's group page and reset dry run:
    the same lag (negative where the committed offset is past the log end, as Kafka's tool
    shows it), the same targets, and the same refusal of a shift without a committed offset."""
    _create(cluster, "same-plan", 2)
    with Producer(cluster.gateway) as producer:
        for i in range(10):
            producer.send("same-plan", value=f"s{i}".encode(), partition=0)
            producer.send("same-plan", value=f"s{i}".encode(), partition=1)
        producer.flush()
    p0, p1 = TopicPartition("same-plan", 0), TopicPartition("same-plan", 1)
    with Admin(cluster.gateway) as admin:
        admin.alter_consumer_group_offsets("same-plan-g", {p0: 4, p1: 12})  # p1: past the end
    cli = ("--bootstrap-server", cluster.gateway, "--json")
    described = assert_ok(run_strom("groups", "describe", "same-plan-g", *cli)).json()
    cli_lag = {r["partition"]: r["lag"] for r in described["partitions"]}
    assert cli_lag == {0: 6, 1: -2}
    client = HttpSession(console.url)
    status, page = client.get("/groups/same-plan-g")
    assert status == 200
    console_lag = [int(v) for v in re.findall(r'<td class="lag">(-?\d+)</td>', page)]
    assert console_lag == [cli_lag[0], cli_lag[1]]

    reset = ("groups", "reset-offsets", "--group", "same-plan-g", "--topic", "same-plan")
    plan = assert_ok(run_strom(*reset, "--shift-by", "-3", *cli)).json()
    cli_targets = [r["new_offset"] for r in plan["partitions"]]  # partition order
    assert cli_targets == [1, 9]
    fields = {"strategy": "shift", "value": "-3", "topic": "same-plan"}
    status, page = client.post("/groups/same-plan-g/reset", fields)
    assert status == 200
    assert [int(v) for v in re.findall(r'<td class="target"><b>(\d+)</b>', page)] == cli_targets

    with Admin(cluster.gateway) as admin:
        admin.delete_consumer_group_offsets("same-plan-g", [p1])
    refused = run_strom(*reset, "--shift-by", "1", *cli)
    line = assert_one_line_error(refused, "no committed offset for same-plan:1")
    status, page = client.post("/groups/same-plan-g/reset", fields)
    assert status == 400 and "no committed offset for same-plan:1" in page, line
