"""The console in real headless Chromium against a real server (tests/console/run-tests starts it):
sign-in, the overview's figures against the API's, an account's bar and events against the API's,
holds appearing and leaving live, commit and release from the console, refunds from a hold's and a
job's page (the figures against the API's; a press after a lost answer resends the same request id),
webhook endpoints and their deliveries against the API's, an account's credit lots (the API's list
in spending order, a live countdown to each expiry, a hold's draw, a lot expiring on the page and its
lot_expired event), payments (signed Stripe and Standard
Webhooks events posted to the server: the events' "payment" labels, a shortfall's and a dispute's
freeze and its reason), prices (the empty state, the API's prices and versions, the form's new
version, same price and refusals with the server's detail; a hold reserved by feature showing the
price it was reserved at), an account key kept out, an admin:read key reading everything with no
control that changes anything (the prices' form included; its PUT refused with 403 when the form is
shown by hand; and a read account key's reserve refused, naming holds:write), no request outside the
server. Screenshots of each
page go to $CONSOLE_SCREENSHOTS."""
import base64
import datetime
import hashlib
import hmac
import http.client
import json
import os
import sys
import tempfile
import time
import unittest

from selenium.webdriver.common.by import By

import support

BINARY = os.environ.get("TOLLGATE_BIN", os.path.join(os.path.dirname(__file__), "../../build/tollgate"))
SHOTS = os.environ.get("CONSOLE_SCREENSHOTS", os.path.join(os.path.dirname(__file__), "../../build/console-screenshots"))
PATIENCE = 15  # seconds before a wait calls it a failure (a hang detector, not a goal)
# The server's payment secrets (api.md "Payments"): Stripe's through its variable, Standard Webhooks'
# ("whsec_" + base64 of 32 bytes) in the configuration file.
STRIPE_SECRET = "whsec_console_test_stripe_signing_secret"
WEBHOOK_SECRET = "whsec_" + base64.b64encode(bytes(range(32))).decode()


def wait_for(check, what, timeout=PATIENCE):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            last = check()
            if last:
                return last
        except Exception as e:  # a stale element while the view redraws: try again
            last = e
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


class ConsoleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        os.makedirs(SHOTS, exist_ok=True)
        cls.provider = support.FakeProvider(BINARY)
        config_dir = tempfile.mkdtemp(prefix="tollgate-console-config-")
        config = cls.provider.config(config_dir)
        with open(config, "a") as f:  # two rate-limit policies for the policies page
            f.write('\n[ratelimits.login]\nlimit = 5\nperiod_ms = 60000\nstore = "shared"\n'
                    '\n[ratelimits.search]\nlimit = 100\nperiod_ms = 1000\nstore = "local"\n')
            f.write(f'\n[payments.webhook]\nsecret = "{WEBHOOK_SECRET}"\n')
        cls.server = support.Server(BINARY, env={"TOLLGATE_STRIPE_SIGNING_SECRETS": STRIPE_SECRET},
                                    extra_args=("--config", config))
        cls.api = support.Api(cls.server.url)
        cls.driver = support.chrome()

    @classmethod
    def tearDownClass(cls):
        cls.driver.quit()
        cls.api.close()
        cls.server.stop()
        cls.provider.stop()

    # --- helpers ------------------------------------------------------------------------------
    def open(self, hash_="#/"):
        self.driver.get(f"{self.server.url}/console{hash_}")

    def sign_in(self, key=support.ADMIN_KEY):
        self.open()
        self.driver.execute_script("sessionStorage.clear()")
        self.driver.refresh()
        field = wait_for(lambda: self.driver.find_element(By.ID, "key"), "the sign-in form")
        wait_for(lambda: field.is_displayed(), "the sign-in form shown")
        field.send_keys(key)
        self.driver.find_element(By.ID, "sign-in-button").click()

    def signed_in(self):
        self.sign_in()
        wait_for(lambda: self.driver.find_element(By.ID, "nav").is_displayed(), "the console after sign-in")

    def text(self, element_id):
        return self.driver.find_element(By.ID, element_id).text

    def go(self, hash_):
        self.driver.execute_script("location.hash = arguments[0]", hash_)

    def shot(self, name):
        self.driver.save_screenshot(os.path.join(SHOTS, f"{name}.png"))

    def mark_page(self):
        """A marker that a reload would wipe: the test checks it is still there (no reload)."""
        self.driver.execute_script("window.__noReload = 'still here'")

    def assert_not_reloaded(self):
        self.assertEqual(self.driver.execute_script("return window.__noReload"), "still here", "the page was reloaded")

    # --- tests --------------------------------------------------------------------------------
    def test_1_sign_in_with_a_wrong_key_says_so(self):
        self.sign_in("tgk_not-a-key-at-all")
        message = wait_for(lambda: self.text("sign-in-error"), "the error message")
        self.assertIn("Wrong key", message)
        self.assertFalse(self.driver.find_element(By.ID, "nav").is_displayed())
        self.assertIsNone(self.driver.execute_script("return sessionStorage.getItem('tollgate.key')"))
        self.shot("sign-in-wrong-key")

    def test_2_sign_in_and_out(self):
        self.signed_in()
        self.assertEqual(self.driver.execute_script("return sessionStorage.getItem('tollgate.key')"), support.ADMIN_KEY)
        self.assertEqual(self.driver.get_cookies(), [], "the key must not be in a cookie")
        self.assertNotIn(support.ADMIN_KEY, self.driver.current_url)
        wait_for(lambda: self.driver.find_element(By.ID, "live").get_attribute("data-feed") == "following",
                 "the page to follow the change feed")
        self.driver.find_element(By.ID, "sign-out").click()
        wait_for(lambda: self.driver.find_element(By.ID, "sign-in").is_displayed(), "the sign-in form after sign-out")
        self.assertIsNone(self.driver.execute_script("return sessionStorage.getItem('tollgate.key')"))
        # Signed out, the page stops following the feed: an event comes and nothing is asked.
        self.driver.get_log("performance")  # forget what was sent so far
        self.api.account("acct-2-after-sign-out", 3)
        time.sleep(2.5)
        sent = [json.loads(e["message"])["message"]["params"]["request"]["url"] for e in self.driver.get_log("performance")
                if json.loads(e["message"])["message"]["method"] == "Network.requestWillBeSent"]
        self.assertEqual(sent, [], "requests after sign-out")

    def test_3_an_account_key_cannot_use_the_admin_views(self):
        self.api.account("kiosk-key", 5)
        secret = self.api.ok("POST", "/v1/accounts/kiosk-key/keys", {})["secret"]
        self.sign_in(secret)
        message = wait_for(lambda: self.text("sign-in-error"), "the error message")
        self.assertIn("account key", message)
        self.assertIn("admin key", message)
        # Even with the key put into the tab's storage by hand, the admin views show nothing of it.
        self.driver.execute_script("sessionStorage.setItem('tollgate.key', arguments[0])", secret)
        self.open("#/")
        self.driver.refresh()
        error = wait_for(lambda: self.text("error"), "the refusal")
        # GET /v1/key says it is an account key: no admin view is mounted (so none asks the server).
        self.assertIn("account key", error)
        self.assertIn("admin:read", error)
        self.assertEqual(self.driver.find_elements(By.CSS_SELECTOR, "#accounts-body tr"), [])
        self.driver.execute_script("sessionStorage.clear()")

    def test_4_the_overview_shows_what_the_api_reports(self):
        for i in range(3):
            self.api.account(f"ov-{i}", 100)
        h1 = self.api.hold("ov-0", 10, "ov-h1")
        h2 = self.api.hold("ov-1", 20, "ov-h2")
        self.api.hold("ov-2", 30, "ov-h3")
        self.api.ok("POST", f"/v1/holds/{h1['hold_id']}/commit", {})
        self.api.ok("POST", f"/v1/holds/{h2['hold_id']}/release", {})
        self.assertEqual(self.api.call("POST", "/v1/holds", {"account_id": "ov-2", "amount": 1000, "request_id": "ov-no"})[0], 409)
        self.signed_in()
        self.go("#/")

        def figures_match():
            m = self.api.metrics()
            accounts = self.text("fig-accounts").replace(",", "")
            active = self.text("fig-active-holds").replace(",", "")
            want = (str(int(m["tollgate_accounts"])), str(int(m["tollgate_active_holds"])))
            return (accounts, active) == want and self.text("fig-ended-committed") == str(int(m['tollgate_holds_ended_total{outcome="committed"}'])) \
                and self.text("fig-ended-released") == str(int(m['tollgate_holds_ended_total{outcome="released"}'])) \
                and self.driver.find_element(By.ID, "fig-conflicts").get_attribute("data-total") == str(int(m["tollgate_reservation_conflicts_total"]))
        wait_for(figures_match, "the overview's figures to equal /metrics'")
        listed = self.api.ok("GET", "/v1/accounts?limit=1000")["accounts"]
        self.assertEqual(int(self.text("fig-accounts").replace(",", "")), len(listed))
        active = self.api.ok("GET", "/v1/holds?status=active&limit=1000")["holds"]
        self.assertEqual(int(self.text("fig-active-holds")), len(active))
        self.assertGreaterEqual(int(self.text("fig-ended-committed")), 1)
        self.assertEqual(self.text("fig-violations"), "0")
        # The accounts table: the API's first page.
        rows = wait_for(lambda: self.driver.find_elements(By.CSS_SELECTOR, "#accounts-body tr"), "the accounts table")
        self.assertEqual([r.get_attribute("data-account") for r in rows], [a["account_id"] for a in listed][:50])
        # Audit now.
        self.driver.find_element(By.ID, "audit-now").click()
        result = wait_for(lambda: self.driver.find_element(By.ID, "audit-result").get_attribute("data-checked"), "the audit")
        audit = self.api.ok("GET", "/v1/audit")
        self.assertEqual(int(result), audit["accounts_checked"])
        self.assertEqual(self.driver.find_element(By.ID, "audit-result").get_attribute("data-violations"), "0")
        self.shot("overview")

    def account_matches_api(self, account_id):
        a = self.api.ok("GET", f"/v1/accounts/{account_id}")
        got = {k: self.driver.find_element(By.ID, f"bar-{k}").get_attribute("data-value") for k in ("available", "reserved", "used")}
        return got == {k: str(a[k]) for k in ("available", "reserved", "used")}

    def test_5_an_account_page_matches_the_api(self):
        self.api.account("acct-5", 200)
        h = self.api.hold("acct-5", 50, "a5-1")
        self.api.ok("POST", f"/v1/holds/{h['hold_id']}/commit", {"amount": 30})
        self.api.hold("acct-5", 40, "a5-2")
        self.signed_in()
        self.go("#/account/acct-5")
        wait_for(lambda: self.account_matches_api("acct-5"), "the bar to show the API's balances")
        a = self.api.ok("GET", "/v1/accounts/acct-5")
        self.assertEqual(a["available"] + a["reserved"] + a["used"], a["purchased"])
        self.assertIn(f"= purchased {a['purchased']}", self.text("legend-purchased"))
        # The bar's widths are proportional to the balances.
        widths = {k: self.driver.execute_script(f"return document.getElementById('bar-{k}').getBoundingClientRect().width")
                  for k in ("available", "reserved", "used")}
        total = sum(widths.values())
        for k in widths:
            self.assertAlmostEqual(widths[k] / total, a[k] / a["purchased"], delta=0.02)
        events = self.api.ok("GET", "/v1/accounts/acct-5/events?limit=50")["events"]

        def rows():
            r = self.driver.find_elements(By.CSS_SELECTOR, "#events-body tr")
            return [[td.text for td in row.find_elements(By.TAG_NAME, "td")] for row in r]
        table = wait_for(lambda: rows() if len(rows()) == len(events) else None, "the event table")
        for row, e in zip(table, events):
            self.assertEqual(row[0], str(e["event_id"]))
            self.assertEqual(row[2], e["type"])
            self.assertEqual(row[3].replace(",", ""), str(e["amount"]))
            self.assertEqual(row[7].replace(",", ""), str(e["available_after"]))
            self.assertEqual(row[8].replace(",", ""), str(e["reserved_after"]))
            self.assertEqual(row[9].replace(",", ""), str(e["used_after"]))
        # Filter by type (in the page).
        self.driver.find_element(By.CSS_SELECTOR, "#filter-type option[value='committed']").click()
        self.assertEqual([r[2] for r in rows()], ["committed"])
        self.shot("account")

    def test_6_a_hold_appears_live_and_leaves_when_committed(self):
        """Through the change feed, not a poll: each of three holds appears, and leaves when
        committed, within LIVE_S of the API's answer — the old 2-s poll would meet that for all
        six with a chance of 1 in 64 — and the page's live marker names an event id at least
        the hold's own (the feed's next_after: a poll has none)."""
        LIVE_S = 1.0
        self.api.account("acct-6", 100)
        self.signed_in()
        self.go("#/account/acct-6")
        wait_for(lambda: self.account_matches_api("acct-6"), "the account page")
        wait_for(lambda: self.driver.find_element(By.ID, "live").get_attribute("data-feed") == "following",
                 "the page to follow the change feed")
        self.mark_page()
        for round_ in range(3):
            time.sleep(2.2)  # quiet for longer than the page's refresh gap (2 s): the next event shows at once
            began = time.time()
            h = self.api.hold("acct-6", 5, f"a6-live-{round_}", ttl_ms=120000)
            answered = time.time()
            row_id = f"hold-{h['hold_id']}"
            row = wait_for(lambda: self.driver.find_element(By.ID, row_id), "the new hold in the table")
            appeared = time.time() - answered
            self.assertLess(appeared, LIVE_S, f"round {round_}: the hold appeared {appeared:.2f} s after the API answered")
            reserved = [e for e in self.api.ok("GET", "/v1/accounts/acct-6/events?limit=1000")["events"]
                        if e.get("hold_id") == h["hold_id"]]
            self.assertEqual([e["type"] for e in reserved], ["reserved"])
            last_seen = wait_for(lambda: self.driver.find_element(By.ID, "live").get_attribute("data-last-event"),
                                 "the feed's last event id on the page")
            self.assertGreaterEqual(int(last_seen), reserved[0]["event_id"], "the hold came through the feed")
            if round_ == 0:
                age1 = wait_for(lambda: row.find_element(By.CLASS_NAME, "age").text, "the hold's age")
                time.sleep(1.2)
                age2 = row.find_element(By.CLASS_NAME, "age").text
                self.assertNotEqual(age1, age2, "the age is live")
                self.assertTrue(row.find_element(By.CLASS_NAME, "expires").text.endswith(("s", "m")))
                wait_for(lambda: self.account_matches_api("acct-6"), "the bar to show the reservation")
                self.shot("account-live-hold")
            time.sleep(max(0.0, 2.2 - (time.time() - began)))
            self.api.ok("POST", f"/v1/holds/{h['hold_id']}/commit", {})
            answered = time.time()
            wait_for(lambda: not self.driver.find_elements(By.ID, row_id), "the committed hold to leave the table")
            left = time.time() - answered
            self.assertLess(left, LIVE_S, f"round {round_}: the committed hold left {left:.2f} s after the API answered")
            wait_for(lambda: self.account_matches_api("acct-6"), "the bar to show the commit")
        self.assert_not_reloaded()

    def confirm(self):
        ok = wait_for(lambda: self.driver.find_element(By.ID, "confirm-ok"), "the confirmation")
        wait_for(lambda: ok.is_displayed(), "the confirmation shown")
        ok.click()

    def test_7_commit_and_release_in_the_console(self):
        self.api.account("acct-7", 100)
        c = self.api.hold("acct-7", 30, "a7-commit")
        r = self.api.hold("acct-7", 20, "a7-release")
        self.signed_in()
        self.go("#/account/acct-7")
        row = wait_for(lambda: self.driver.find_element(By.ID, f"hold-{c['hold_id']}"), "the hold to commit")
        self.mark_page()
        row.find_element(By.CLASS_NAME, "commit").click()
        self.shot("account-confirm")
        self.confirm()
        wait_for(lambda: self.api.ok("GET", "/v1/accounts/acct-7")["used"] == 30, "the commit in the ledger")
        wait_for(lambda: self.driver.find_element(By.ID, "bar-used").get_attribute("data-value") == "30", "the bar after the commit")
        row = self.driver.find_element(By.ID, f"hold-{r['hold_id']}")
        row.find_element(By.CLASS_NAME, "release").click()
        self.confirm()
        wait_for(lambda: self.api.ok("GET", "/v1/accounts/acct-7")["reserved"] == 0, "the release in the ledger")
        wait_for(lambda: self.account_matches_api("acct-7"), "the bar after the release")
        types = [e["type"] for e in self.api.ok("GET", "/v1/accounts/acct-7/events")["events"]]
        self.assertEqual(types, ["credited", "reserved", "reserved", "committed", "released"])
        wait_for(lambda: len(self.driver.find_elements(By.CSS_SELECTOR, "#events-body tr")) == 5, "the events in the table")
        # A partial commit: 7 of 12 used, 5 back to available.
        p = self.api.hold("acct-7", 12, "a7-partial")
        row = wait_for(lambda: self.driver.find_element(By.ID, f"hold-{p['hold_id']}"), "the hold to commit in part")
        row.find_element(By.CLASS_NAME, "commit-amount").send_keys("7")
        row.find_element(By.CLASS_NAME, "commit").click()
        self.confirm()
        wait_for(lambda: self.api.ok("GET", f"/v1/holds/{p['hold_id']}")["committed_amount"] == 7, "the partial commit")
        wait_for(lambda: self.driver.find_element(By.ID, "bar-used").get_attribute("data-value") == "37", "the bar after it")
        # A credit through the form, confirmed.
        self.driver.find_element(By.ID, "credit-amount").send_keys("15")
        self.driver.find_element(By.ID, "credit-submit").click()
        self.confirm()
        wait_for(lambda: self.api.ok("GET", "/v1/accounts/acct-7")["purchased"] == 115, "the credit in the ledger")
        wait_for(lambda: self.account_matches_api("acct-7"), "the bar after the credit")
        self.assert_not_reloaded()
        # The hold's page: its story.
        self.go(f"#/hold/{c['hold_id']}")
        rows = wait_for(lambda: self.driver.find_elements(By.CSS_SELECTOR, "#hold-events-body tr"), "the hold's events")
        self.assertEqual([x.find_elements(By.TAG_NAME, "td")[2].text for x in rows], ["reserved", "committed"])
        self.shot("hold")

    def test_7b_a_job_tells_its_story(self):
        self.api.account("acct-job", 10)
        self.api.ok("POST", "/v1/jobs", {"client_request_id": "gen-console-1", "account_id": "acct-job", "cost": 3,
                                         "provider": "imagegen", "input": {"prompt": "a cat"}})
        job = self.api.ok("GET", "/v1/jobs/gen-console-1?wait_ms=20000")
        self.assertEqual(job["status"], "completed", job)
        self.signed_in()
        # From the account's event log, through the job's link.
        self.go("#/account/acct-job")
        link = wait_for(lambda: self.driver.find_element(By.CSS_SELECTOR, "#events-body a[href='#/job/gen-console-1']"),
                        "the job's link in the event log")
        link.click()
        summary = wait_for(lambda: self.driver.find_element(By.ID, "job-summary"), "the job's page")
        self.assertEqual(summary.get_attribute("data-status"), "completed")
        self.assertEqual(self.text("hold-title"), job["hold_id"])
        rows = wait_for(lambda: self.driver.find_elements(By.CSS_SELECTOR, "#hold-events-body tr"), "the hold's events")
        self.assertEqual([x.find_elements(By.TAG_NAME, "td")[2].text for x in rows], ["reserved", "committed"])
        history = self.api.ok("GET", "/v1/jobs/gen-console-1/history")["entries"]
        shown = self.driver.find_elements(By.CSS_SELECTOR, "#job-history-body tr")
        self.assertEqual([x.find_elements(By.TAG_NAME, "td")[1].text for x in shown], [e["kind"] for e in history])
        self.shot("job")

    def test_7c_locks_and_rate_limit_policies(self):
        self.api.ok("POST", "/v1/locks/report-7c/acquire", {"owner": "worker-1", "ttl_ms": 60000})
        self.api.ok("POST", "/v1/locks/sweep-7c/acquire", {"owner": "worker-2", "ttl_ms": 60000})
        self.api.ok("POST", "/v1/locks/sweep-7c/release", {"owner": "worker-2"})
        for _ in range(7):
            self.api.call("POST", "/v1/ratelimits/login/check", {"key": "alice"})
        self.signed_in()
        self.go("#/locks")

        def lock_rows():
            return {r.get_attribute("data-lock"): r for r in self.driver.find_elements(By.CSS_SELECTOR, "#locks-body tr[data-lock]")}

        rows = wait_for(lambda: lock_rows() if "report-7c" in lock_rows() else None, "the held lock in the table")
        self.assertNotIn("sweep-7c", rows, "released: not held, not shown with 'held only'")
        api_lock = self.api.ok("GET", "/v1/locks/report-7c")
        row = rows["report-7c"]
        self.assertEqual(row.find_element(By.CLASS_NAME, "owner").text, "worker-1")
        self.assertEqual(row.find_element(By.CLASS_NAME, "fence").text, str(api_lock["fence"]))
        self.assertEqual(row.find_element(By.CLASS_NAME, "state").text, "held")
        lease1 = int(row.find_element(By.CLASS_NAME, "lease").get_attribute("data-lease-left-ms"))
        self.assertTrue(50000 < lease1 <= 60000, lease1)
        shown1 = row.find_element(By.CLASS_NAME, "lease").text
        time.sleep(1.2)
        self.assertNotEqual(wait_for(lambda: lock_rows()["report-7c"].find_element(By.CLASS_NAME, "lease").text, "the lease"),
                            shown1, "the lease counts down")
        self.shot("locks")
        self.driver.find_element(By.ID, "locks-held").click()  # every key ever used
        rows = wait_for(lambda: lock_rows() if "sweep-7c" in lock_rows() else None, "the released lock")
        self.assertEqual(rows["sweep-7c"].find_element(By.CLASS_NAME, "state").text, "free")
        self.assertEqual(rows["sweep-7c"].find_element(By.CLASS_NAME, "owner").text, "–")

        self.go("#/ratelimits")
        expected = {p["policy"]: p for p in self.api.ok("GET", "/v1/ratelimits")["policies"]}
        self.assertEqual(set(expected), {"login", "search"})
        self.assertEqual((expected["login"]["allowed"], expected["login"]["limited"]), (5, 2))

        def policy_cells(name, cls):
            return self.driver.find_element(By.CSS_SELECTOR, f'#policies-body tr[data-policy="{name}"] .{cls}').text

        wait_for(lambda: policy_cells("login", "limited") == "2", "the login policy's refusals")
        self.assertEqual(policy_cells("login", "allowed"), "5")
        self.assertEqual(policy_cells("login", "limit"), "5")
        self.assertEqual(policy_cells("search", "limit"), "100")
        self.assertEqual(policy_cells("search", "period"), "1.0s")
        self.shot("ratelimits")

    def contrast(self, selector):
        """The contrast ratio (WCAG) of the first `selector`'s text against the background behind it."""
        return self.driver.execute_script("""
            const el = document.querySelector(arguments[0]);
            const rgb = (c) => c.match(/[\\d.]+/g).map(Number);
            let bg = null;
            for (let e = el; e && !bg; e = e.parentElement) {
              const c = rgb(getComputedStyle(e).backgroundColor);
              if (c.length < 4 || c[3] > 0) bg = c;
            }
            bg = bg || [255, 255, 255];
            const lum = (c) => { const [r, g, b] = c.slice(0, 3).map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
                                 return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
            const a = lum(rgb(getComputedStyle(el).color)), b = lum(bg);
            return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);""", selector)

    def color_scheme(self, scheme):
        self.driver.execute_cdp_cmd("Emulation.setEmulatedMedia",
                                    {"features": [{"name": "prefers-color-scheme", "value": scheme}]})

    def test_7d_webhook_endpoints_and_their_deliveries(self):
        self.signed_in()
        # None registered yet: the page says how to register one.
        self.go("#/webhooks")
        empty = wait_for(lambda: self.driver.find_element(By.ID, "webhooks-empty").is_displayed()
                         and self.driver.find_element(By.ID, "webhooks-empty"), "the empty state")
        self.assertIn("tollgate webhook add URL", empty.text)
        self.assertFalse(self.driver.find_element(By.ID, "webhooks").is_displayed())
        self.shot("webhooks-empty")

        # An endpoint where nothing listens: every attempt fails with an error and no status code.
        self.api.account("hooked-7d", 5)
        dead = f"http://127.0.0.1:{support.free_port()}/hook"
        made = self.api.ok("POST", "/v1/webhook-endpoints", {"url": dead, "account_id": "hooked-7d",
                                                            "event_types": ["credited", "debited"]})
        endpoint_id = made["endpoint_id"]
        self.api.ok("POST", "/v1/accounts/hooked-7d/credits", {"amount": 2, "reference": "hooked-7d-2"})
        self.api.ok("POST", "/v1/accounts/hooked-7d/credits", {"amount": 3, "reference": "hooked-7d-3"})
        path = f"/v1/webhook-endpoints/{endpoint_id}/deliveries"
        wait_for(lambda: [d for d in self.api.ok("GET", path)["deliveries"] if d["attempts"] >= 1][1:],
                 "two attempts recorded", timeout=30)

        def endpoint_cells():
            row = self.driver.find_element(By.CSS_SELECTOR, f'#webhooks-body tr[data-endpoint="{endpoint_id}"]')
            return {c: row.find_element(By.CLASS_NAME, c).text for c in ("url", "status", "filter", "cursor", "failing")}

        endpoint = self.api.ok("GET", f"/v1/webhook-endpoints/{endpoint_id}")
        self.assertIsNotNone(endpoint["failing_since"], endpoint)
        cells = wait_for(lambda: (lambda c: c if c["failing"] == endpoint["failing_since"] else None)(endpoint_cells()),
                         "the endpoint's row, failing")
        endpoint = self.api.ok("GET", f"/v1/webhook-endpoints/{endpoint_id}")
        self.assertEqual(cells["url"], dead)
        self.assertEqual(cells["status"], endpoint["status"])
        self.assertEqual(cells["filter"], "credited, debited · account hooked-7d")
        wait_for(lambda: endpoint_cells()["cursor"] == str(
            self.api.ok("GET", f"/v1/webhook-endpoints/{endpoint_id}")["delivery_cursor"]), "the cursor the API reports")
        self.shot("webhooks")

        # Its deliveries: each row's status, attempts, last answer and next attempt, as the API has them.
        self.driver.find_element(By.LINK_TEXT, endpoint_id).click()

        def delivery_rows():
            rows = self.driver.find_elements(By.CSS_SELECTOR, "#deliveries-body tr[data-webhook]")
            return {r.get_attribute("data-webhook"): {
                "status": r.find_element(By.CLASS_NAME, "status").text,
                "attempts": r.find_element(By.CLASS_NAME, "attempts").text,
                "answer": r.find_element(By.CLASS_NAME, "answer").text,
                "next": r.find_element(By.CLASS_NAME, "next").get_attribute("data-next-attempt-at")} for r in rows}

        def answer_text(d):
            if d["last_status_code"] is None:
                return d["last_error"] or "–"
            return f"HTTP {d['last_status_code']}" + (f" · {d['last_error']}" if d["last_error"] else "")

        def matches_api():
            expected = self.api.ok("GET", path)["deliveries"]
            shown = delivery_rows()
            want = {d["webhook_id"]: {"status": d["status"], "attempts": str(d["attempts"]),
                                      "answer": answer_text(d),
                                      "next": d["next_attempt_at"] or ""} for d in expected}
            if shown != want:
                return None
            order = [r.get_attribute("data-webhook") for r in
                     self.driver.find_elements(By.CSS_SELECTOR, "#deliveries-body tr[data-webhook]")]
            return order == [d["webhook_id"] for d in expected] and expected

        expected = wait_for(matches_api, "the deliveries the API reports")
        self.assertEqual(len(expected), 2)
        self.assertTrue(all(d["status"] == "pending" and d["last_error"] for d in expected), expected)
        self.assertRegex(self.driver.find_element(By.CSS_SELECTOR, "#deliveries-body .next").text, r"\((in .+|due)\)$")
        self.assertEqual(self.driver.find_element(By.CSS_SELECTOR, '#webhook-facts [data-field="url"]').text, dead)
        self.shot("webhook-deliveries")
        # The status filter reaches the API: nothing is delivered.
        from selenium.webdriver.support.ui import Select
        Select(self.driver.find_element(By.ID, "deliveries-status")).select_by_value("delivered")
        wait_for(lambda: self.driver.find_element(By.ID, "deliveries-body").text == "no delivered delivery",
                 "the empty filtered list")

        # Readable in light and in dark mode (the console keeps its light palette under a dark preference).
        Select(self.driver.find_element(By.ID, "deliveries-status")).select_by_value("")
        wait_for(lambda: len(delivery_rows()) == 2, "the deliveries again")
        try:
            for scheme in ("light", "dark"):
                self.color_scheme(scheme)
                for selector in ("#deliveries-body td", "#deliveries-body .answer", "#webhook-facts dd", "h1", "th"):
                    self.assertGreaterEqual(self.contrast(selector), 4.5, f"{selector} in {scheme} mode")
                self.shot(f"webhook-deliveries-{scheme}")
        finally:
            self.color_scheme("")

    # Wraps the page's fetch: every refund POST is recorded (url, body); after `window.__dropRefundAnswers
    # = n` the answers of the next n are dropped — each request reaches the server, which refunds, and
    # the page sees a failed fetch, as after a connection lost on the way back.
    DROP_REFUND_ANSWERS = """
        const real = window.fetch;
        window.__refunds = [];
        window.__dropRefundAnswers = 0;
        window.fetch = async (input, init) => {
          const url = String(input);
          if (!/\\/refund$/.test(url)) return real(input, init);
          window.__refunds.push({ url, body: JSON.parse(init.body) });
          const answer = await real(input, init);
          if (window.__dropRefundAnswers > 0) {
            window.__dropRefundAnswers--;
            throw new TypeError('Failed to fetch (the test dropped the answer)');
          }
          return answer;
        };"""

    def hold_fact(self, field):
        return self.driver.find_element(By.CSS_SELECTOR, f'#hold-facts [data-field="{field}"]').text

    def hold_facts_match_api(self, hold_id):
        hold = self.api.ok("GET", f"/v1/holds/{hold_id}")
        shown = (self.hold_fact("committed"), self.hold_fact("refunded"))
        return shown == (str(hold["committed_amount"]), str(hold["refunded_amount"])) and hold

    def refund_in_the_form(self, amount, reason):
        amount_field = self.driver.find_element(By.ID, "refund-amount")
        amount_field.clear()
        if amount is not None:
            amount_field.send_keys(str(amount))
        reason_field = self.driver.find_element(By.ID, "refund-reason")
        reason_field.clear()
        reason_field.send_keys(reason)
        self.driver.find_element(By.ID, "refund-submit").click()
        self.confirm()

    def refund_result(self, contains):
        return wait_for(lambda: (lambda t: t if contains in t else None)(self.text("refund-result")),
                        f"the refund's result to say {contains!r}")

    def test_7e_refunds_from_a_hold_and_a_job(self):
        self.api.account("acct-refund", 100)
        held = self.api.hold("acct-refund", 40, "ar-1")
        hold_id = held["hold_id"]
        self.api.ok("POST", f"/v1/holds/{hold_id}/commit", {"amount": 30})
        self.signed_in()
        self.driver.execute_script(self.DROP_REFUND_ANSWERS)
        self.go(f"#/hold/{hold_id}")
        wait_for(lambda: self.hold_facts_match_api(hold_id), "the hold's committed and refunded figures")
        self.assertEqual(self.hold_fact("refunded"), "0")
        form = self.driver.find_element(By.ID, "refund")
        wait_for(form.is_displayed, "the refund form of a committed hold")
        self.assertIn("30 of 30 charged left", self.text("refund-left"))
        self.mark_page()

        # A refund whose answer is lost: the server refunded 10; the page cannot know.
        self.driver.execute_script("window.__dropRefundAnswers = 1")
        self.refund_in_the_form(10, "jammed print")
        self.refund_result("same request id")
        self.assertEqual(self.driver.find_element(By.ID, "refund-result").get_attribute("class"), "error")
        wait_for(lambda: self.api.ok("GET", f"/v1/holds/{hold_id}")["refunded_amount"] == 10, "the first refund in the ledger")
        wait_for(lambda: self.hold_fact("refunded") == "10", "the page to show it (refreshed)")
        # Pressed again, as typed: the same request id and body; the server answers that refund.
        self.driver.find_element(By.ID, "refund-submit").click()
        self.confirm()
        self.refund_result("10 of the charge given back in all")
        sent = self.driver.execute_script("return window.__refunds")
        self.assertEqual(len(sent), 2, sent)
        self.assertEqual(sent[0], sent[1], "a press after a lost answer sends the same request")
        first_id = sent[0]["body"]["request_id"]
        self.assertEqual(sent[0]["body"], {"amount": 10, "reason": "jammed print", "request_id": first_id})
        self.assertTrue(sent[0]["url"].endswith(f"/v1/holds/{hold_id}/refund"), sent[0]["url"])
        hold = wait_for(lambda: self.hold_facts_match_api(hold_id), "the hold's figures after the refund")
        self.assertEqual((hold["committed_amount"], hold["refunded_amount"]), (30, 10), "refunded once")
        self.assertIn("20 of 30 charged left", self.text("refund-left"))
        self.assertNotEqual(form.get_attribute("data-request-id"), first_id, "the next refund gets a new id")
        self.assertEqual(self.driver.find_element(By.ID, "refund-amount").get_attribute("value"), "")
        self.shot("hold-refund")

        # More than is left: the server's problem, as it says it; nothing moves.
        self.refund_in_the_form(25, "too much")
        detail = self.refund_result("refund_exceeds_charge")
        self.assertIn("at most 20 can be refunded, not 25", detail)
        self.assertEqual(self.api.ok("GET", f"/v1/holds/{hold_id}")["refunded_amount"], 10)
        for scheme in ("light", "dark"):  # the form and its messages readable in both modes
            try:
                self.color_scheme(scheme)
                for selector in ("#refund-form strong", "#refund-left", "#refund-result", "#hold-facts dd"):
                    self.assertGreaterEqual(self.contrast(selector), 4.5, f"{selector} in {scheme} mode")
            finally:
                self.color_scheme("")
        self.shot("hold-refund-refused")

        # Empty amount: everything left. The form goes away; the figures are the API's.
        self.refund_in_the_form(None, "the rest")
        self.refund_result("30 of the charge given back in all")
        wait_for(lambda: not form.is_displayed(), "the form gone once everything is given back")
        hold = wait_for(lambda: self.hold_facts_match_api(hold_id), "the hold's figures after the last refund")
        self.assertEqual(hold["refunded_amount"], 30)
        events = [e for e in self.api.ok("GET", "/v1/accounts/acct-refund/events")["events"] if e.get("hold_id") == hold_id]
        refunded = [e for e in events if e["type"] == "refunded"]
        self.assertEqual([(e["amount"], e["reason"]) for e in refunded], [(10, "jammed print"), (20, "the rest")])
        self.assertEqual(refunded[0]["reference"], first_id)
        # Read in one go inside the wait: a refresh the feed asks for may redraw the rows meanwhile
        # (a stale element is read again).
        cells = wait_for(lambda: (lambda r: [(x.find_elements(By.TAG_NAME, "td")[2].text,
                                              x.find_elements(By.TAG_NAME, "td")[3].text) for x in r]
                                  if len(r) == len(events) else None)(
            self.driver.find_elements(By.CSS_SELECTOR, "#hold-events-body tr")), "the refunds in the hold's events")
        self.assertEqual(cells, [(e["type"], str(e["amount"])) for e in events])
        self.go("#/account/acct-refund")
        wait_for(lambda: self.account_matches_api("acct-refund"), "the account's bar after the refunds")
        a = self.api.ok("GET", "/v1/accounts/acct-refund")
        self.assertEqual((a["available"], a["used"], a["purchased"]), (100, 0, 100))

        # A job's hold: refunded through the job's route, from the job's page and from its hold's page.
        self.api.account("acct-refund-job", 10)
        self.api.ok("POST", "/v1/jobs", {"client_request_id": "gen-console-refund", "account_id": "acct-refund-job",
                                         "cost": 3, "provider": "imagegen", "input": {"prompt": "a dog"}})
        job = self.api.ok("GET", "/v1/jobs/gen-console-refund?wait_ms=20000")
        self.assertEqual(job["status"], "completed", job)
        self.go("#/job/gen-console-refund")
        wait_for(lambda: self.hold_facts_match_api(job["hold_id"]), "the job's hold figures")
        def form_shown():
            return self.driver.find_element(By.ID, "refund").is_displayed()
        wait_for(form_shown, "the job's refund form")
        self.assertIn("through job gen-console-refund", self.text("refund-left"))
        self.refund_in_the_form(1, "blurry")
        self.refund_result("1 of the charge given back in all")
        self.go(f"#/hold/{job['hold_id']}")
        wait_for(lambda: self.hold_facts_match_api(job["hold_id"]) and self.hold_fact("refunded") == "1", "the hold's page")
        wait_for(form_shown, "the job's hold's refund form")
        self.refund_in_the_form(1, "still blurry")
        self.refund_result("2 of the charge given back in all")
        sent = self.driver.execute_script("return window.__refunds")[-2:]
        self.assertEqual([x["url"].split("/v1/")[1] for x in sent], ["jobs/gen-console-refund/refund"] * 2)
        self.assertNotEqual(sent[0]["body"]["request_id"], sent[1]["body"]["request_id"])
        hold = wait_for(lambda: self.hold_facts_match_api(job["hold_id"]), "the job's hold after its refunds")
        self.assertEqual(hold["refunded_amount"], 2)
        job_refunds = [e for e in self.api.ok("GET", "/v1/accounts/acct-refund-job/events")["events"] if e["type"] == "refunded"]
        self.assertEqual([(e["amount"], e["job_id"]) for e in job_refunds], [(1, "gen-console-refund")] * 2)
        self.assert_not_reloaded()

    def stripe(self, event_type, obj):
        """A Stripe event, signed as Stripe signs it: Stripe-Signature t=…,v1= hex HMAC-SHA256 of "{t}.{body}"."""
        body = json.dumps({"id": f"evt_{obj['id']}_{event_type}", "object": "event", "type": event_type,
                           "data": {"object": obj}})
        t = int(time.time())
        v1 = hmac.new(STRIPE_SECRET.encode(), f"{t}.{body}".encode(), hashlib.sha256).hexdigest()
        return self.signed_post("/v1/payments/stripe", body, {"Stripe-Signature": f"t={t},v1={v1}"})

    def standard_webhook(self, webhook_id, payload):
        """Another provider's event, signed as Standard Webhooks: v1,base64 HMAC-SHA256 of "{id}.{t}.{body}"."""
        body = json.dumps(payload)
        t = int(time.time())
        key = base64.b64decode(WEBHOOK_SECRET[len("whsec_"):])
        signature = base64.b64encode(hmac.new(key, f"{webhook_id}.{t}.{body}".encode(), hashlib.sha256).digest()).decode()
        return self.signed_post("/v1/payments/webhook", body, {"webhook-id": webhook_id, "webhook-timestamp": str(t),
                                                               "webhook-signature": f"v1,{signature}"})

    def signed_post(self, path, body, headers):
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=30)
        try:
            conn.request("POST", path, body=body.encode(), headers={"Content-Type": "application/json", **headers})
            r = conn.getresponse()
            answer = json.loads(r.read())
        finally:
            conn.close()
        self.assertEqual(r.status, 200, f"POST {path}: {answer}")
        return answer

    def payment_events_match_api(self, account_id):
        """The event log's rows against the API's events: amounts, balances after, the "payment" label
        on exactly the provider's credits and debits (naming the provider), every reason shown."""
        events = self.api.ok("GET", f"/v1/accounts/{account_id}/events?limit=50")["events"]
        rows = self.driver.find_elements(By.CSS_SELECTOR, "#events-body tr")
        if len(rows) != len(events):
            return None
        for row, e in zip(rows, events):
            cells = row.find_elements(By.TAG_NAME, "td")
            if (cells[0].text, cells[2].text) != (str(e["event_id"]), e["type"]):
                return None
            self.assertEqual(cells[3].text.replace(",", ""), str(e["amount"]))
            self.assertEqual(cells[7].text.replace(",", ""), str(e["available_after"]))
            reference = e.get("reference", "")
            provider = ("stripe" if reference.startswith("stripe:") else "webhook" if reference.startswith("payment:")
                        else None) if e["type"] in ("credited", "debited") else None
            tags = row.find_elements(By.CSS_SELECTOR, ".tag.payment")
            if provider:
                self.assertEqual([(t.text, t.get_attribute("data-provider")) for t in tags],
                                 [(f"payment · {provider}", provider)], e)
            else:
                self.assertEqual(tags, [], e)
            if e.get("reason"):
                self.assertEqual(row.find_element(By.CLASS_NAME, "reason").text, e["reason"])
        return events

    def frozen_shown(self, account_id):
        """The page's freeze notice against the API's account: hidden when not frozen, else its reason."""
        a = self.api.ok("GET", f"/v1/accounts/{account_id}")
        notice = self.driver.find_element(By.ID, "frozen")
        if notice.is_displayed() != a["frozen"] or notice.get_attribute("data-reason") != (a["frozen_reason"] or ""):
            return None
        return a

    def test_7f_payments_are_labelled_and_a_freeze_says_why(self):
        self.api.account("acct-pay")
        session = {"id": "cs_console_1", "object": "checkout.session", "client_reference_id": "acct-pay",
                   "payment_status": "paid", "payment_intent": "pi_console_1", "metadata": {"tollgate_credits": "25"}}
        self.assertEqual(self.stripe("checkout.session.completed", session)["outcome"], "credited")
        self.assertEqual(self.standard_webhook("msg_console_1", {"type": "payment.succeeded", "payment_id": "order-c1",
                                                                 "account_id": "acct-pay", "credits": 5})["outcome"],
                         "credited")
        h = self.api.hold("acct-pay", 28, "pay-spend")
        self.api.ok("POST", f"/v1/holds/{h['hold_id']}/commit", {})
        # The Stripe payment refunded in full after its credits were spent: 25 taken back from 2, in debt.
        charge = {"id": "ch_console_1", "object": "charge", "payment_intent": "pi_console_1",
                  "amount": 2500, "amount_refunded": 2500}
        refunded = self.stripe("charge.refunded", charge)
        self.assertEqual(refunded["taken_back"], 25, refunded)
        a = self.api.ok("GET", "/v1/accounts/acct-pay")
        self.assertEqual((a["available"], a["used"], a["frozen"], a["frozen_reason"]), (-23, 28, True, "refund shortfall"))

        self.signed_in()
        self.go("#/account/acct-pay")
        wait_for(lambda: self.account_matches_api("acct-pay"), "the bar to show the API's balances (in debt)")
        wait_for(lambda: self.frozen_shown("acct-pay"), "the freeze and its reason")
        self.assertIn("Frozen: refund shortfall", self.text("frozen"))
        self.assertIn("FROZEN", self.text("settings"))
        events = wait_for(lambda: self.payment_events_match_api("acct-pay"), "the event log as the API has it")
        self.assertEqual([(e["type"], e.get("reference"), e.get("reason")) for e in events if e["type"] != "reserved"], [
            ("credited", "stripe:cs_console_1", None), ("credited", "payment:order-c1", None),
            ("committed", None, None), ("debited", "stripe:ch_console_1:refunded:2500", "refunded at stripe"),
            ("account_updated", None, "refund shortfall")])
        self.assertEqual(len(self.driver.find_elements(By.CSS_SELECTOR, "#events-body .tag.payment")), 3)
        self.mark_page()
        self.shot("account-payments")
        try:
            for scheme in ("light", "dark"):
                self.color_scheme(scheme)
                for selector in ("#frozen", "#frozen strong", "#events-body .tag.payment", "#events-body .reason"):
                    self.assertGreaterEqual(self.contrast(selector), 4.5, f"{selector} in {scheme} mode")
                self.shot(f"account-payments-{scheme}")
        finally:
            self.color_scheme("")

        # A credit repays the debt: open again, live; then a dispute freezes it for another reason.
        self.api.ok("POST", "/v1/accounts/acct-pay/credits", {"amount": 30, "reference": "acct-pay-repay"})
        a = wait_for(lambda: self.frozen_shown("acct-pay"), "the freeze notice gone once repaid")
        self.assertEqual((a["available"], a["frozen"], a["frozen_reason"]), (7, False, None))
        wait_for(lambda: self.payment_events_match_api("acct-pay"), "the repayment in the event log")
        self.assertEqual(self.driver.find_elements(By.CSS_SELECTOR, "#events-body .reason")[-1].text,
                         "refund shortfall repaid")
        self.assertEqual(self.stripe("charge.dispute.created", {"id": "dp_console_1", "object": "dispute",
                                                                "payment_intent": "pi_console_1",
                                                                "charge": "ch_console_1"})["outcome"], "frozen")
        a = wait_for(lambda: self.frozen_shown("acct-pay"), "the dispute's freeze")
        self.assertEqual(a["frozen_reason"], "payment disputed")
        self.assertIn("Frozen: payment disputed", self.text("frozen"))
        wait_for(lambda: self.payment_events_match_api("acct-pay"), "the dispute in the event log")
        self.assert_not_reloaded()
        self.shot("account-payment-disputed")

    def test_7g_credit_lots_count_down_and_expire_on_the_account_page(self):
        now = datetime.datetime.now(datetime.timezone.utc)
        rfc3339 = lambda t: t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"
        self.api.account("acct-7g")
        credit = lambda amount, ref, **lot: self.api.ok(
            "POST", "/v1/accounts/acct-7g/credits", {"amount": amount, "reference": ref, **lot})["event"]["lot_id"]
        promo = credit(5, "a7g-promo", priority=10, category="promotional",
                       expires_at=rfc3339(now + datetime.timedelta(days=3, hours=4, minutes=30)))
        brief = credit(3, "a7g-brief", expires_at=rfc3339(now + datetime.timedelta(seconds=12)))
        plain = credit(20, "a7g-plain")
        hold = self.api.hold("acct-7g", 4, "a7g-hold", ttl_ms=600000)
        self.assertEqual(hold["lots"], [{"lot_id": promo, "amount": 4}])
        self.signed_in()
        self.go("#/account/acct-7g")

        def lot_rows():
            rows = self.driver.find_elements(By.CSS_SELECTOR, "#lots-body tr[data-lot]")
            return [[row.get_attribute("data-lot")] + [td.text for td in row.find_elements(By.TAG_NAME, "td")] for row in rows]
        api_lots = self.api.ok("GET", "/v1/accounts/acct-7g/lots")["lots"]
        self.assertEqual([l["lot_id"] for l in api_lots], [promo, brief, plain], "the spending order")
        table = wait_for(lambda: lot_rows() if len(lot_rows()) == 3 else None, "the lots table")
        self.assertEqual([r[0] for r in table], [promo, brief, plain])
        for row, lot in zip(table, api_lots):
            self.assertEqual(row[2:5], [lot["status"], lot["category"], str(lot["priority"])])
            self.assertEqual([x.replace(",", "") for x in row[5:10]],
                             [str(lot[k]) for k in ("amount", "available", "reserved", "used", "expired")])
        self.assertTrue(table[0][10].startswith("expires in 3d 4h"), table[0][10])
        self.assertEqual(table[2][10], "never")
        self.assertEqual(self.driver.find_element(By.CSS_SELECTOR, f"#hold-{hold['hold_id']} .draw").text, f"{promo} 4")
        first = wait_for(lambda: self.driver.find_element(By.CSS_SELECTOR, f"#lot-{brief} .lot-expires").text, "a countdown")
        self.assertTrue(first.startswith("expires in "), first)
        time.sleep(1.2)
        self.assertNotEqual(self.driver.find_element(By.CSS_SELECTOR, f"#lot-{brief} .lot-expires").text, first, "live")
        self.shot("account-lots")

        # The brief lot runs out: the page says so at once, then the reaper's lot_expired event arrives.
        wait_for(lambda: self.driver.find_element(By.CSS_SELECTOR, f"#lot-{brief}").get_attribute("data-status") == "expired",
                 "the brief lot shown expired")
        wait_for(lambda: "expired 3" in self.text("legend-expired"), "the expired balance in the legend")

        def lot_expired_rows():
            rows = self.driver.find_elements(By.CSS_SELECTOR, "#events-body tr")
            cells = [[td.text for td in row.find_elements(By.TAG_NAME, "td")] for row in rows]
            return [c for c in cells if len(c) > 2 and c[2] == "lot_expired"]
        expired = wait_for(lot_expired_rows, "the lot_expired event in the table")
        self.assertEqual((expired[0][3], expired[0][10], expired[0][11]), ("3", "3", brief))
        self.assertEqual(self.driver.find_element(By.CSS_SELECTOR, f"#lot-{brief} .expired").text, "3")
        self.assertEqual(self.api.ok("GET", "/v1/accounts/acct-7g")["expired"], 3)
        self.shot("account-lot-expired")

        # A credit from the form as a lot of its own: a bad priority is refused in the page, then a
        # promotional lot of priority 5 that expires in 2 days goes first in the spending order.
        find = lambda element_id: self.driver.find_element(By.ID, element_id)
        find("credit-amount").send_keys("8")
        find("credit-priority").send_keys("101")
        find("credit-submit").click()
        wait_for(lambda: "priority" in self.text("action-result"), "the page to refuse priority 101")
        find("credit-priority").clear()
        find("credit-priority").send_keys("5")
        find("credit-expires-days").send_keys("2")
        find("credit-category").find_element(By.CSS_SELECTOR, "option[value='promotional']").click()
        find("credit-submit").click()
        self.assertIn("as a lot (promotional, priority 5, expiring ", self.text("confirm-text"))
        self.confirm()
        lots = wait_for(lambda: (lambda ls: ls if len(ls) == 4 else None)(self.api.ok("GET", "/v1/accounts/acct-7g/lots")["lots"]),
                        "the console's credit as a lot")
        self.assertEqual((lots[0]["amount"], lots[0]["priority"], lots[0]["category"]), (8, 5, "promotional"))
        wait_for(lambda: [r[0] for r in lot_rows()][:1] == [lots[0]["lot_id"]], "the new lot first in the table")
        self.assertTrue(self.driver.find_element(By.CSS_SELECTOR, f"#lot-{lots[0]['lot_id']} .lot-expires").text
                        .startswith(("expires in 1d 23h", "expires in 2d")))

        self.go(f"#/hold/{hold['hold_id']}")
        wait_for(lambda: self.driver.find_element(By.CSS_SELECTOR, "#hold-facts dd[data-field='from lots']").text == f"{promo} 4",
                 "the hold's lots on its page")

    # --- prices ---------------------------------------------------------------------------------
    def price_rows(self):
        """The prices table as shown: [[feature, credits per unit, version, updated at], …]."""
        rows = self.driver.find_elements(By.CSS_SELECTOR, "#prices-body tr[data-feature]")
        return [[row.get_attribute("data-feature")] + [td.text for td in row.find_elements(By.TAG_NAME, "td")] for row in rows]

    def prices_match_api(self):
        expected = self.api.ok("GET", "/v1/prices?limit=50")["prices"]
        want = [[p["feature"], p["feature"], f"{p['credits_per_unit']:,}", str(p["version"]), p["updated_at"]] for p in expected]
        return self.price_rows() == want and expected

    def version_rows(self):
        rows = self.driver.find_elements(By.CSS_SELECTOR, "#versions-body tr[data-version]")
        return [[td.text for td in row.find_elements(By.TAG_NAME, "td")] for row in rows]

    def versions_match_api(self, feature):
        """The versions table against the API's, newest first: each in force until the next one was set."""
        expected = self.api.ok("GET", f"/v1/prices/{feature}/versions")["versions"]
        until = ["now"] + [v["updated_at"] for v in expected[:-1]]
        want = [[str(v["version"]), f"{v['credits_per_unit']:,}", v["updated_at"], u] for v, u in zip(expected, until)]
        return self.version_rows() == want and expected

    def set_price_in_the_form(self, credits, feature=None, confirmed=True):
        """Types a price into the form (the feature too, on the prices page) and presses Set price…;
        the confirmation's text (confirmed=False: the page asks none, its read of the price refused)."""
        if feature is not None:
            field = self.driver.find_element(By.ID, "price-feature")
            field.clear()
            field.send_keys(feature)
        field = self.driver.find_element(By.ID, "price-credits")
        field.clear()
        field.send_keys(str(credits))
        self.driver.find_element(By.ID, "price-submit").click()
        if not confirmed:
            return None
        wait_for(lambda: self.driver.find_element(By.ID, "confirm-ok").is_displayed(), "the confirmation")
        question = self.text("confirm-text")
        self.confirm()
        return question

    def price_result(self, contains):
        return wait_for(lambda: (lambda t: t if contains in t else None)(self.text("price-result")),
                        f"the price form's result to say {contains!r}")

    def test_7h_prices_listed_set_and_refused(self):
        self.assertEqual(self.api.ok("GET", "/v1/prices")["prices"], [], "no price before this test")
        self.signed_in()
        # None yet: the page says how to set one.
        self.go("#/prices")
        empty = wait_for(lambda: self.driver.find_element(By.ID, "prices-empty").is_displayed()
                         and self.driver.find_element(By.ID, "prices-empty"), "the empty state")
        self.assertIn("tollgate price set FEATURE CREDITS_PER_UNIT", empty.text)
        self.assertIn("or with the form below", empty.text)
        self.assertFalse(self.driver.find_element(By.ID, "prices").is_displayed())
        self.assertTrue(self.driver.find_element(By.ID, "price-form").is_displayed())
        self.shot("prices-empty")

        # Prices set through the API (the CLI's calls) while the page is open: no event announces
        # them, the page's own period (5 s) reads them; the table shows the API's numbers.
        self.mark_page()
        self.assertEqual(self.api.call("PUT", "/v1/prices/photo", {"credits_per_unit": 3})[0], 201)
        self.assertEqual(self.api.call("PUT", "/v1/prices/photo", {"credits_per_unit": 5})[0], 201)
        self.assertEqual(self.api.call("PUT", "/v1/prices/gpu-minute", {"credits_per_unit": 1200})[0], 201)
        self.assertEqual(self.api.call("PUT", "/v1/prices/tokens.1k", {"credits_per_unit": 1})[0], 201)
        expected = wait_for(self.prices_match_api, "the API's prices in the table")
        self.assertEqual([(p["feature"], p["credits_per_unit"], p["version"]) for p in expected],
                         [("gpu-minute", 1200, 1), ("photo", 5, 2), ("tokens.1k", 1, 1)])
        self.assertFalse(self.driver.find_element(By.ID, "prices-empty").is_displayed())
        self.assertEqual(self.text("prices-page"), "page 1 (last)")
        self.assert_not_reloaded()
        self.shot("prices")

        # The form: a new version, in the API and in the table at once.
        question = self.set_price_in_the_form(7, feature="photo")
        self.assertIn("from 5 to 7 credits per unit (version 3)", question)
        self.price_result("photo now costs 7 credits per unit (version 3")
        photo = self.api.ok("GET", "/v1/prices/photo")
        self.assertEqual((photo["credits_per_unit"], photo["version"]), (7, 3))
        wait_for(self.prices_match_api, "the new version in the table")
        self.assertEqual(self.driver.find_element(By.ID, "price-feature").get_attribute("value"), "")
        # The same price again: no version (a PUT is safe to resend), and the page says so.
        question = self.set_price_in_the_form(7, feature="photo")
        self.assertIn("already costs 7 credits per unit (version 3)", question)
        self.price_result("photo already costs 7 credits per unit (version 3): nothing changed")
        self.assertEqual(len(self.api.ok("GET", "/v1/prices/photo/versions")["versions"]), 3)
        # A new feature from the form: its version 1.
        question = self.set_price_in_the_form(2, feature="scan")
        self.assertIn("It has none yet: this is its version 1", question)
        self.price_result("scan now costs 2 credits per unit (version 1")
        wait_for(lambda: (lambda e: e and [p["feature"] for p in e] == ["gpu-minute", "photo", "scan", "tokens.1k"])(
            self.prices_match_api()), "the new feature in the table")

        # Refused by the server: its code and detail, as it says them; nothing changes.
        self.set_price_in_the_form(0, feature="photo")
        detail = self.price_result("invalid_request")
        self.assertIn("credits_per_unit must be an integer from 1 to 9007199254740991, got 0", detail)
        self.assertEqual(self.driver.find_element(By.ID, "price-result").get_attribute("class"), "error")
        # A feature the server refuses: its read of the price is refused already (no confirmation).
        self.set_price_in_the_form(4, feature="no spaces", confirmed=False)
        self.assertIn("feature must be 1-128 characters", self.price_result("invalid_request"))
        self.assertFalse(self.driver.find_element(By.ID, "confirm").is_displayed())
        self.assertEqual(self.api.ok("GET", "/v1/prices/photo"), photo)
        self.assertEqual(len(self.api.ok("GET", "/v1/prices/photo/versions")["versions"]), 3)
        self.assertEqual(len(self.api.ok("GET", "/v1/prices")["prices"]), 4)
        wait_for(self.prices_match_api, "the table unchanged")
        for scheme in ("light", "dark"):  # the table, the form and its refusal readable in both modes
            try:
                self.color_scheme(scheme)
                for selector in ("#prices-body td", "#prices-body a", "#price-form strong", "#price-result", "th"):
                    self.assertGreaterEqual(self.contrast(selector), 4.5, f"{selector} in {scheme} mode")
            finally:
                self.color_scheme("")
        self.shot("prices-refused")

        # A feature's versions, newest first, each in force until the next one was set.
        self.driver.find_element(By.LINK_TEXT, "photo").click()
        wait_for(lambda: self.driver.execute_script("return location.hash") == "#/price/photo", "the feature's page")
        versions = wait_for(lambda: self.versions_match_api("photo"), "the API's versions in the table")
        self.assertEqual([(v["version"], v["credits_per_unit"]) for v in versions], [(3, 7), (2, 5), (1, 3)])
        self.assertEqual(self.driver.find_element(By.CSS_SELECTOR, "#versions-body tr.current").get_attribute("data-version"), "3")
        fact = lambda field: self.driver.find_element(By.CSS_SELECTOR, f'#price-facts [data-field="{field}"]').text
        self.assertEqual((fact("credits per unit"), fact("version"), fact("set at")), ("7", "3", photo["updated_at"]))
        self.shot("price-versions")
        # Its form sets this feature's price: version 4 on top, in force now.
        question = self.set_price_in_the_form(9)
        self.assertIn("Change the price of photo from 7 to 9", question)
        self.price_result("photo now costs 9 credits per unit (version 4")
        versions = wait_for(lambda: (lambda v: v and len(v) == 4 and v)(self.versions_match_api("photo")), "version 4 in the table")
        self.assertEqual((versions[0]["version"], versions[0]["credits_per_unit"]), (4, 9))
        wait_for(lambda: fact("version") == "4", "the current price's facts")
        self.assert_not_reloaded()

        # A feature without a price: how to set one.
        self.go("#/price/no-such-feature")
        missing = wait_for(lambda: self.driver.find_element(By.ID, "price-missing").is_displayed()
                           and self.driver.find_element(By.ID, "price-missing"), "the feature's empty state")
        self.assertIn("tollgate price set no-such-feature CREDITS_PER_UNIT", missing.text)
        self.assertFalse(self.driver.find_element(By.ID, "versions").is_displayed())
        self.assertEqual(self.text("error"), "")

    def test_7i_a_hold_reserved_by_feature_shows_its_price(self):
        self.api.account("acct-7i", 50)
        self.api.ok("PUT", "/v1/prices/print-7i", {"credits_per_unit": 4})
        held = self.api.ok("POST", "/v1/holds", {"account_id": "acct-7i", "feature": "print-7i", "quantity": 3,
                                                 "request_id": "a7i-print"})
        self.assertEqual((held["amount"], held["unit_price"], held["price_version"]), (12, 4, 1))
        # A price change after the reservation: the hold keeps what it was priced at.
        self.api.ok("PUT", "/v1/prices/print-7i", {"credits_per_unit": 6})
        by_amount = self.api.hold("acct-7i", 5, "a7i-amount")
        self.signed_in()
        self.go(f"#/hold/{held['hold_id']}")

        def priced_facts_match_api():
            hold = self.api.ok("GET", f"/v1/holds/{held['hold_id']}")
            shown = tuple(self.hold_fact(f) for f in ("feature", "quantity", "unit price", "price version", "amount", "committed"))
            return shown == (hold["feature"], str(hold["quantity"]), str(hold["unit_price"]), str(hold["price_version"]),
                             str(hold["amount"]), str(hold["committed_amount"])) and hold

        hold = wait_for(priced_facts_match_api, "the hold's price as the API has it")
        self.assertEqual((hold["feature"], hold["quantity"], hold["unit_price"], hold["price_version"]), ("print-7i", 3, 4, 1))
        self.mark_page()
        # Committed by quantity (2 × its own unit price, 4 — not the 6 of now), live through the feed.
        self.api.ok("POST", f"/v1/holds/{held['hold_id']}/commit", {"quantity": 2})
        hold = wait_for(lambda: (lambda x: x and x["status"] == "committed" and x)(priced_facts_match_api()),
                        "the commit by quantity on the page")
        self.assertEqual((hold["committed_amount"], hold["unit_price"], hold["price_version"]), (8, 4, 1))
        self.assertEqual(self.hold_fact("status"), "committed")
        self.assert_not_reloaded()
        self.shot("hold-priced")
        # The feature links to its versions: the hold's version 1, and 2 in force now.
        self.driver.find_element(By.CSS_SELECTOR, '#hold-facts [data-field="feature"] a').click()
        versions = wait_for(lambda: self.versions_match_api("print-7i"), "the feature's versions")
        self.assertEqual([(v["version"], v["credits_per_unit"]) for v in versions], [(2, 6), (1, 4)])
        # A hold reserved by amount has no price among its facts.
        self.go(f"#/hold/{by_amount['hold_id']}")
        wait_for(lambda: self.hold_fact("amount") == "5" and self.hold_fact("request_id") == "a7i-amount", "the hold by amount")
        self.assertEqual(self.driver.find_elements(By.CSS_SELECTOR, '#hold-facts [data-field="feature"], '
                                                                    '#hold-facts [data-field="unit price"]'), [])

    def test_8_no_request_leaves_the_server(self):
        self.signed_in()
        self.go("#/account/acct-7" if self.api.call("GET", "/v1/accounts/acct-7")[0] == 200 else "#/")
        time.sleep(2.5)
        origin = self.server.url
        resources = self.driver.execute_script(
            "return performance.getEntriesByType('resource').map(e => e.name).concat([location.href])")
        self.assertTrue(resources)
        outside = [u for u in resources if not u.startswith(origin + "/")]
        self.assertEqual(outside, [], "requests outside the server")
        # Every request the browser sent (the DevTools protocol's log), also those that failed.
        sent = []
        for entry in self.driver.get_log("performance"):
            message = json.loads(entry["message"])["message"]
            if message["method"] == "Network.requestWillBeSent":
                sent.append(message["params"]["request"]["url"])
        self.assertTrue(sent)
        outside = [u for u in sent if not (u.startswith(origin + "/") or u.startswith("data:"))]
        self.assertEqual(outside, [], "requests outside the server")
        # No key in any URL, and no CSP violation in the console log.
        self.assertFalse([u for u in sent if support.ADMIN_KEY in u])
        errors = [e for e in self.driver.get_log("browser") if "Content Security Policy" in e.get("message", "")]
        self.assertEqual(errors, [])

    def test_9_an_admin_read_key_shows_everything_and_changes_nothing(self):
        self.api.account("acct-9", 40)
        live = self.api.hold("acct-9", 5, "a9-live")
        charged = self.api.hold("acct-9", 3, "a9-charged")
        self.api.ok("POST", f"/v1/holds/{charged['hold_id']}/commit", {})
        made = self.api.ok("POST", "/v1/keys", {"scopes": ["admin:read"], "name": "console auditor"})
        self.assertEqual(made["scopes"], ["admin:read"])
        self.sign_in(made["secret"])
        wait_for(lambda: self.driver.find_element(By.ID, "nav").is_displayed(), "the console after sign-in")
        badge = self.driver.find_element(By.ID, "read-only-badge")
        wait_for(badge.is_displayed, "the read-only badge")
        self.assertEqual(badge.text, "read-only key")
        self.assertEqual(badge.get_attribute("data-scopes"), "admin:read")
        # The overview reads (the feed, /metrics, the accounts, the audit).
        wait_for(lambda: self.driver.find_elements(By.CSS_SELECTOR, "#accounts-body tr[data-account='acct-9']"),
                 "acct-9 in the accounts table")
        self.shot("read-only-overview")

        self.go("#/account/acct-9")
        wait_for(lambda: self.account_matches_api("acct-9"), "the bar to show the API's balances")
        wait_for(lambda: self.driver.find_element(By.ID, f"hold-{live['hold_id']}"), "the live hold's row")
        self.assertEqual(self.driver.find_element(By.ID, "bar-available").get_attribute("data-value"), "32")
        for element_id in ("account-actions", "credit-form", "debit-form", "credit-submit", "debit-submit"):
            self.assertFalse(self.driver.find_element(By.ID, element_id).is_displayed(), element_id)
        row = self.driver.find_element(By.ID, f"hold-{live['hold_id']}")
        for cls in ("commit", "release", "commit-amount"):
            self.assertFalse(row.find_element(By.CLASS_NAME, cls).is_displayed(), cls)
        self.assertEqual([e for e in self.driver.find_elements(By.CSS_SELECTOR, ".write") if e.is_displayed()], [])
        # Only buttons that change nothing are shown: paging, opening, signing out.
        shown = sorted(b.get_attribute("id") or b.text for b in self.driver.find_elements(By.TAG_NAME, "button")
                       if b.is_displayed())
        self.assertEqual(shown, sorted(["Open", "Open", "sign-out", "events-prev", "events-next"]))
        self.shot("read-only-account")

        # A charged hold: the refund form would be offered (not hidden by the page), but not to this key.
        self.go(f"#/hold/{charged['hold_id']}")
        wait_for(lambda: self.driver.find_element(By.CSS_SELECTOR, "#hold-facts dd[data-field='status']").text == "committed",
                 "the charged hold's facts")
        refund = self.driver.find_element(By.ID, "refund")
        wait_for(lambda: refund.get_attribute("hidden") is None, "the page to offer a refund")
        self.assertFalse(refund.is_displayed())
        self.assertFalse(self.driver.find_element(By.ID, "refund-submit").is_displayed())
        self.shot("read-only-hold")

        # Signed out and in again with the admin key: no badge, the controls are back.
        self.driver.find_element(By.ID, "sign-out").click()
        self.signed_in()
        self.go("#/account/acct-9")
        wait_for(lambda: self.driver.find_element(By.ID, "credit-form").is_displayed(), "the credit form for the admin key")
        self.assertFalse(self.driver.find_element(By.ID, "read-only-badge").is_displayed())
        self.assertEqual(self.api.ok("GET", "/v1/accounts/acct-9")["available"], 32)

    def test_9b_a_read_account_key_reads_the_balance_and_cannot_reserve(self):
        self.api.account("acct-9b", 7)
        made = self.api.ok("POST", "/v1/accounts/acct-9b/keys", {"scopes": ["read"]})
        self.assertEqual(made["scopes"], ["read"])
        self.sign_in(made["secret"])  # the console itself is for admin keys
        self.assertIn("account key", wait_for(lambda: self.text("sign-in-error"), "the error message"))
        # What a kiosk page holding this key can do, from this page's own fetch.
        seen = self.driver.execute_async_script("""
            const [secret, done] = arguments;
            (async () => {
              const headers = { Authorization: `Bearer ${secret}`, 'Content-Type': 'application/json' };
              const account = await fetch('/v1/accounts/acct-9b', { headers, credentials: 'omit' });
              const reserve = await fetch('/v1/holds', { method: 'POST', headers, credentials: 'omit',
                body: JSON.stringify({ account_id: 'acct-9b', amount: 1, request_id: 'a9b-1' }) });
              done({ account: account.status, available: (await account.json()).available,
                     reserve: reserve.status, problem: await reserve.json() });
            })().catch((e) => done({ error: String(e) }));
        """, made["secret"])
        self.assertEqual((seen["account"], seen["available"]), (200, 7), seen)
        self.assertEqual((seen["reserve"], seen["problem"]["code"]), (403, "forbidden"), seen)
        self.assertEqual(seen["problem"]["missing_scope"], "holds:write")
        self.assertIn("holds:write", seen["problem"]["detail"])
        self.assertEqual(self.api.ok("GET", "/v1/accounts/acct-9b")["reserved"], 0)
        self.assertEqual(self.api.ok("GET", "/v1/holds?account_id=acct-9b")["holds"], [])


    def test_9c_an_admin_read_key_reads_prices_and_cannot_set_one(self):
        self.api.ok("PUT", "/v1/prices/scan-9c", {"credits_per_unit": 2})
        made = self.api.ok("POST", "/v1/keys", {"scopes": ["admin:read"], "name": "console price auditor"})
        self.sign_in(made["secret"])
        wait_for(lambda: self.driver.find_element(By.ID, "read-only-badge").is_displayed(), "the read-only badge")
        self.go("#/prices")
        wait_for(lambda: "scan-9c" in [r[0] for r in self.price_rows()], "the price in the table")
        wait_for(self.prices_match_api, "the API's prices in the table")
        self.assertFalse(self.driver.find_element(By.ID, "price-actions").is_displayed(), "the form, for a read-only key")
        self.assertEqual([e for e in self.driver.find_elements(By.CSS_SELECTOR, ".write") if e.is_displayed()], [])
        self.shot("read-only-prices")
        self.go("#/price/scan-9c")
        wait_for(lambda: self.versions_match_api("scan-9c"), "the feature's versions")
        self.assertFalse(self.driver.find_element(By.ID, "price-actions").is_displayed())
        # The server refuses such a key anyway: with the form shown by hand, its 403 shows under the
        # form as any refusal does, and nothing changes.
        self.driver.execute_script("document.body.classList.remove('read-only')")
        self.set_price_in_the_form(3)
        detail = self.price_result("forbidden")
        self.assertIn("admin", detail)
        self.assertEqual(self.driver.find_element(By.ID, "price-result").get_attribute("class"), "error")
        price = self.api.ok("GET", "/v1/prices/scan-9c")
        self.assertEqual((price["credits_per_unit"], price["version"]), (2, 1))
        self.driver.find_element(By.ID, "sign-out").click()

if __name__ == "__main__":
    unittest.main(verbosity=2, argv=sys.argv)
