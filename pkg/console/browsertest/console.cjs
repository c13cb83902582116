// Drives the console in Debian's chromium with playwright-core; run by TestConsoleInBrowser,
// which passes the intake's URL, three tokens, the identifiers to type and the screenshot
// directory in the environment. Prints one JSON line: the steps done, the text of every
// page visited after an identifier was typed (for the leak scan) and the request submitted.
"use strict";
const { chromium } = require("playwright-core");

const env = process.env;
const base = env.LETHE_URL + "/console/";
const out = { steps: [], pages: [], request: "" };
const step = s => { out.steps.push(s); process.stderr.write("step " + s + "\n"); };

function must(cond, msg) { if (!cond) throw new Error(msg); }

async function login(browser, token) {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  const page = await ctx.newPage();
  page.on("pageerror", e => process.stderr.write("page error: " + e.message + "\n"));
  await page.goto(base);
  await page.waitForSelector("#login");
  await page.fill("#token", token);
  await page.click("#login button[type=submit]");
  await page.waitForSelector("#requests");
  return page;
}

// capture keeps what a page shows (URL, title, HTML) for the leak scan.
async function capture(page) {
  out.pages.push(page.url() + "\n" + (await page.title()) + "\n" + (await page.content()));
}

async function shot(page, name) {
  await page.screenshot({ path: env.SCREENSHOTS + "/" + name + ".png", fullPage: true });
}

async function submit(page, fields) {
  await page.goto(base + "#/submit");
  await page.waitForSelector("#submit");
  if (fields.scope) await page.selectOption("#submit select[name=scope]", fields.scope);
  if (fields.subject) await page.fill("#submit input[name=subject_id]", fields.subject);
  if (fields.session) await page.fill("#submit input[name=session_ids]", fields.session);
  await page.selectOption("#submit select[name=regulation]", fields.regulation || "GDPR");
  await page.click("#submit button[type=submit]");
  await page.waitForURL(/#\/request\/er_/);
  await page.waitForSelector("#request-head h2");
  return decodeURIComponent(page.url().split("#/request/")[1]);
}

async function state(page) {
  return page.getAttribute("#request-head h2 .badge", "data-state");
}

(async () => {
  const browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
      "--disable-component-update", "--no-first-run"],
  });
  try {
    // Log in.
    const ctx0 = await browser.newContext({ viewport: { width: 1280, height: 860 } });
    const p0 = await ctx0.newPage();
    await p0.goto(base);
    await p0.waitForSelector("#login");
    await shot(p0, "01-login");
    await ctx0.close();
    const ops = await login(browser, env.TOKEN_OPS);
    must((await ops.textContent("#who")).includes("ops-acme"), "whoami not shown");
    step("login");

    // Submit and watch the stores complete live (the page polls; rows change status).
    const id = await submit(ops, { subject: env.SUBJECT_ID, session: env.SESSION_ID, regulation: "GDPR" });
    out.request = id;
    must(!ops.url().includes(env.SUBJECT_ID) && !(await ops.title()).includes(env.SUBJECT_ID), "identifier in URL or title");
    step("submit");
    const seen = new Set();
    const deadline = Date.now() + 30000;
    for (;;) {
      const statuses = await ops.$$eval("#stores tr[data-store]", rows => rows.map(r => r.dataset.status));
      statuses.forEach(s => seen.add(s));
      if (statuses.length && statuses.every(s => s !== "PENDING") && (await state(ops)) === "COMPLETE") break;
      must(Date.now() < deadline, "stores did not complete: " + statuses.join(",") + " page: " + (await ops.textContent("#main")));
      await ops.waitForTimeout(200);
    }
    must(seen.has("DELETED") || seen.has("NOTHING_FOUND"), "no store reported");
    step("live");
    await capture(ops);

    // The receipt and the chain's verification.
    await ops.waitForSelector("#receipt-stores tr td");
    const rows = await ops.$$eval("#receipt-stores tr", r => r.length - 1);
    must(rows >= 5, "receipt lists " + rows + " stores");
    step("receipt");
    await ops.waitForSelector("#chain[data-verified=true]");
    must((await ops.textContent("#chain")).includes("Chain verified"), "chain not verified");
    step("chain");
    await shot(ops, "03-request-receipt");
    await capture(ops);

    // The receipt's review list: an operator without the approver role is refused; the
    // privacy officer erases one probable copy and dismisses the other with a reason.
    await ops.waitForSelector("#review-items tr[data-item]");
    const items = await ops.$$eval("#review-items tr[data-item]", r => r.map(x => x.dataset.item));
    must(items.length === 2, "review lists " + items.join(","));
    await ops.click(`#review-items tr[data-item="${items[0]}"] button[data-decide=ERASE]`);
    await ops.waitForSelector("#toast.bad");
    must((await ops.textContent("#toast")).includes("approver"), "an operator's review decision was not refused");
    step("review-refused");
    const officer = await login(browser, env.TOKEN_DPO);
    await officer.goto(base + "#/request/" + id);
    await officer.waitForSelector(`#review-items tr[data-item="${items[1]}"] input[name=reason]`);
    await officer.click(`#review-items tr[data-item="${items[1]}"] button[data-decide=DISMISS]`);
    await officer.waitForSelector("#toast.bad");
    must((await officer.textContent("#toast")).includes("reason"), "a dismissal without reason was not refused");
    await officer.fill(`#review-items tr[data-item="${items[1]}"] input[name=reason]`, "a wiki page about shipping, not the customer's");
    await officer.click(`#review-items tr[data-item="${items[1]}"] button[data-decide=DISMISS]`);
    await officer.waitForSelector(`#review-items tr[data-item="${items[1]}"][data-decided=DISMISS]`);
    await officer.click(`#review-items tr[data-item="${items[0]}"] button[data-decide=ERASE]`);
    await officer.waitForFunction(item => {
      const c = document.querySelector(`#review-items tr[data-item="${item}"] .review-state`);
      return c && c.textContent.startsWith("erased");
    }, items[0], { timeout: 60000 });
    must((await officer.textContent(`#review-items tr[data-item="${items[0]}"] .review-state`)).includes("1 deleted, 0 remaining"), "the erased copy's read-back not shown");
    must((await officer.textContent(`#review-items tr[data-item="${items[1]}"] .review-state`)).includes("not the customer's"), "the dismissal's reason not shown");
    step("review");
    await shot(officer, "03b-review");
    await capture(officer);

    // The list of requests with its SLA clocks.
    await ops.goto(base + "#/requests");
    await ops.waitForSelector(`#requests tr[data-request="${id}"]`);
    await shot(ops, "02-requests");
    await capture(ops);

    // Cancel a scheduled request (LGPD has a window here).
    const sched = await submit(ops, { subject: env.SUBJECT_ID + ".other", regulation: "LGPD" });
    await ops.waitForSelector("#request-head .badge[data-state=SCHEDULED]");
    await shot(ops, "04-scheduled");
    await ops.click("button[data-action=cancel]");
    await ops.waitForSelector("#request-head .badge[data-state=CANCELLED]");
    must((await ops.textContent("#timeline")).includes("cancel → CANCELLED by ops-acme"), "cancellation not in the timeline");
    step("cancel");
    await shot(ops, "05-cancelled");
    await capture(ops);

    // A tenant offboarding waits for a second person with the approver role.
    const off = await submit(ops, { scope: "TENANT", regulation: "GDPR" });
    await ops.waitForSelector("#request-head .badge[data-state=AWAITING_APPROVAL]");
    await ops.click("button[data-action=approve]");
    await ops.waitForSelector("#toast.bad");
    must((await ops.textContent("#toast")).includes("refused"), "the submitter's approval was not refused");
    must((await state(ops)) === "AWAITING_APPROVAL", "approved by the submitter");
    await shot(ops, "06-awaiting-approval");
    const dpo = await login(browser, env.TOKEN_DPO);
    await dpo.goto(base + "#/request/" + off);
    await dpo.waitForSelector("button[data-action=approve]");
    await dpo.click("button[data-action=approve]");
    await dpo.waitForFunction(() => {
      const b = document.querySelector("#request-head h2 .badge");
      return b && b.dataset.state !== "AWAITING_APPROVAL";
    });
    must((await dpo.textContent("#timeline")).includes("approve → RELEASED by dpo-acme"), "approval not in the timeline");
    step("approve");
    await shot(dpo, "07-approved");

    // Another tenant's operator is refused the request, and lists none of it.
    const globex = await login(browser, env.TOKEN_GLOBEX);
    must(!(await globex.content()).includes(id), "another tenant lists the request");
    await globex.goto(base + "#/request/" + id);
    await globex.waitForSelector("#request-head .bad");
    must((await globex.textContent("#request-head")).includes("forbidden"), "another tenant was not refused");
    step("refused");
    await shot(globex, "08-refused");

    // The other pages.
    for (const [name, sel] of [["dead-letters", "#dead-letters"], ["inventory", "#inventory"], ["holds", "#holds"]]) {
      await ops.goto(base + "#/" + name);
      await ops.waitForSelector(sel + " tr");
      await shot(ops, "09-" + name);
      await capture(ops);
    }
    must(sched !== id, "two requests share an id");
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify(out) + "\n");
})().catch(e => {
  process.stderr.write("FAILED: " + (e && e.stack || e) + "\n");
  process.stdout.write(JSON.stringify(out) + "\n");
  process.exit(1);
});
