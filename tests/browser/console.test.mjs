// console.test.mjs: txhub console end to end, in Debian's headless
// Chromium driven by playwright-core, against a real PostgreSQL, broker
// and hub (tests/with-services.sh gives TXHUB_PG, TXHUB_BROKERS,
// TXHUB_BIN; run.sh gives TXHUB_BROWSER_DIR and TXHUB_SCREENSHOTS).
//
// The test makes its own database, control topic and group, sends
// envelopes with kcat, starts `txhub run` and `txhub console`, and then
// does what an operator does: a wrong token, the login, the Overview
// against `txhub status --json` (and its refresh without a reload), the
// hostile key on Stuck and Overview, a resolve that gets forwarded, a
// redrive of a failed send that gets sent, a skip (without a reason
// refused, then with one), a message's history, a
// rejected record, the conflicts, every page at 1280x800 with long values
// in every column (rows the set-up writes to PostgreSQL), a cross-site POST
// from a page of another origin, the logout. Tests run in order and share
// the browser.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

const require = createRequire(path.join(process.env.TXHUB_BROWSER_DIR, 'modules.cjs'));
const { chromium } = require('playwright-core');

const BIN = process.env.TXHUB_BIN;
const PG = process.env.TXHUB_PG;
const BROKERS = process.env.TXHUB_BROKERS;
const SHOTS = process.env.TXHUB_SCREENSHOTS;
const NAME = `t_browser_${process.pid}`;
const DB = `${PG} dbname=${NAME}`;
const TOPIC = `ctl.${NAME}`;
const FW = `fw.${NAME}`;
const TOKEN = 'browser-test-token-0123456789';
const HOSTILE = '<img src=x onerror=alert(1)>';
const REASON = 'paid in the shop database, ticket OPS-412';
const WIDTH = 1280;
const HEIGHT = 800;

// Long values, at the limits where there are limits (biz_id 64 bytes,
// message_key 255, a Kafka topic 249 characters): text without a space or
// a hyphen (nothing a browser may break a line at) and prose.
function unbroken(prefix, n) {
  let s = prefix;
  while (s.length < n) s += 'Ab0Cd1Ef2Gh3Ij4Kl5Mn6Op7Qr8St9Uv';
  return s.slice(0, n);
}
function prose(prefix, n) {
  let s = prefix;
  while (s.length < n) s += ' the check-back endpoint answered 503 Service Unavailable again';
  return s.slice(0, n);
}
const LONG = {
  biz: unbroken('tenant', 64),
  key: unbroken('orderkey', 255),
  key2: unbroken('binarykey', 255),
  topic: unbroken('fwtopic.', 249),
  ctlTopic: unbroken('ctltopic.', 249),
  fwKey: unbroken('fwkey', 600),
  header: unbroken('x-header-', 200),
  headerValue: unbroken('hv', 1500),
  url: `http://checkback.example/${unbroken('path', 2000)}`,
  lastError: `${prose('check-back failed:', 700)} ${unbroken('body', 500)}`,
  sendError: `delivery to ${unbroken('fwtopic.', 249)} failed: ${unbroken('err', 600)}`,
  payload: `{"blob":"${unbroken('p', 5000)}"}`,
  detail: `${prose('answered 500:', 600)} ${unbroken('trace', 600)}`,
  actor: unbroken('operator.', 200),
  reason: `${prose('invalid envelope:', 600)} ${unbroken('field', 600)}`,
  reason2: unbroken('rejected', 1200),
  value: unbroken('v', 4000),
  owner: unbroken('host', 120),
  group: unbroken('group.', 249),
  conflict: `${prose('a rollback met a committed row:', 500)} ${unbroken('c', 700)}`,
  resolve: `${prose('checked the shop database:', 500)} ${unbroken('OPS', 450)}`,
};
const LONG_MESSAGE = `/message?${new URLSearchParams({ biz: LONG.biz, key: LONG.key })}`;

const procs = [];
const dialogs = [];
const cspReports = [];
let browser; let page; let consoleUrl; let attacker; let attackerUrl; let profile;

// ---- helpers ----

function sql(query, conninfo = DB) {
  return execFileSync('psql', ['-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-d', conninfo,
    '-c', query], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, PGOPTIONS: '-c client_min_messages=warning' },
  }).trim();
}

const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });

async function until(what, fn, timeoutMs = 30000) {
  const end = Date.now() + timeoutMs;
  let last;
  for (;;) {
    last = await fn();
    if (last) return last;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(200);
  }
}

function settings(extra = []) {
  const xs = [`pg=${DB}`, `control_topic=${TOPIC}`, `group=${NAME}`, `brokers=${BROKERS}`,
    ...extra];
  return xs.flatMap((x) => ['-X', x]);
}

function txhub(args) {
  return execFileSync(BIN, [...settings(), ...args],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

function start(args, extra, log) {
  const out = fs.openSync(path.join(SHOTS, log), 'w');
  const p = spawn(BIN, [...settings(extra), ...args], { stdio: ['ignore', out, out] });
  procs.push(p);
  return p;
}

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// Send records with one key (in order, one partition).
function produce(key, lines) {
  execFileSync('kcat', ['-P', '-b', BROKERS, '-t', TOPIC, '-k', key],
    { input: lines.join('\n') + '\n' });
}

// "key value" of every record on the forward topic.
function forwarded() {
  return execFileSync('kcat', ['-C', '-b', BROKERS, '-t', FW, '-e', '-q', '-f', '%k %s\n'],
    { encoding: 'utf8', timeout: 20000 });
}

async function shot(name) {
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
}

function prepare(key, payload, forward) {
  return JSON.stringify({ type: 'prepare', biz_id: 'shop', message_key: key, payload, forward });
}

// The check box of a row on Stuck, found by its key.
function rowBox(key) {
  return page.locator('#stuck tr').filter({
    has: page.locator('a.key', { hasText: new RegExp(`^${key}$`) }),
  }).locator('input.sel');
}

// ---- set-up: database, records, hub, console, browser, attacker ----

async function setUpData() {
  sql(`DROP DATABASE IF EXISTS ${NAME}`, PG);
  sql(`CREATE DATABASE ${NAME}`, PG);
  txhub(['migrate']);
  // no check-back URL: these become check_failed at first_after_ms
  produce(HOSTILE, [prepare(HOSTILE, { note: '<script>alert(2)</script>' },
    { topic: FW, key: 'k-hostile', headers: { 'x-note': '"><svg onload=alert(3)>' } })]);
  produce('order-1', [prepare('order-1', { order_id: 1, total: '42.00' },
    { topic: FW, key: 'order-1' })]);
  // committed and sent, then a rollback that conflicts
  produce('order-3', [prepare('order-3', { order_id: 3 }, { topic: FW, key: 'order-3' }),
    JSON.stringify({ type: 'commit', biz_id: 'shop', message_key: 'order-3' }),
    JSON.stringify({ type: 'rollback', biz_id: 'shop', message_key: 'order-3' })]);
  produce('<b>k</b>', ['not json <script>alert(5)</script>']);
  start(['run'], ['checkback.first_after_ms=300', 'kafka.session.timeout.ms=6000',
    'kafka.max.poll.interval.ms=10000', 'kafka.heartbeat.interval.ms=500'], 'hub.log');
  await until('the hub to apply the records', () => sql(
    "SELECT count(*) FILTER (WHERE status = 'check_failed') = 2 "
    + "AND count(*) FILTER (WHERE send_status = 'sent') = 1 "
    + 'AND (SELECT count(*) FROM txhub.rejected) = 1 '
    + 'AND (SELECT count(*) FROM txhub.conflicts) = 1 FROM txhub.messages') === 't', 60000);
  // a forward that gave up, in a partition this hub owns: a redrive must
  // make the hub really send it
  const part = sql("SELECT partition FROM txhub.partitions WHERE owner <> '' "
    + 'ORDER BY partition LIMIT 1');
  sql('INSERT INTO txhub.messages (biz_id, message_key, status, send_status, payload, '
    + 'forward_topic, forward_key, send_attempts, last_error, src_partition, src_offset) VALUES '
    + `('shop', 'order-2', 'committed', 'failed', '{"order_id":2}', '${FW}', 'order-2', 15, `
    + `'delivery to ${FW} failed: Broker: Topic authorization failed', ${part}, 0)`);
  insertLongRows();
}

const lit = (v) => `'${String(v).replace(/'/g, "''")}'`;

// Rows with long values in every column the console shows, in partition 99
// of the control topic, which no hub owns: the hub leaves them alone.
// Offsets and epochs at 2^53 - 1, the largest a JSON number holds exactly.
function insertLongRows() {
  const L = LONG;
  const headers = JSON.stringify({ [L.header]: L.headerValue });
  sql('INSERT INTO txhub.messages (biz_id, message_key, status, send_status, payload, '
    + 'forward_topic, forward_key, forward_headers, checkback_url, check_attempts, '
    + 'send_attempts, last_error, src_partition, src_offset, created_at, updated_at) VALUES '
    + `(${lit(L.biz)}, ${lit(L.key)}, 'check_failed', NULL, convert_to(${lit(L.payload)}, 'UTF8'), `
    + `${lit(L.topic)}, ${lit(L.fwKey)}, ${lit(headers)}::jsonb, ${lit(L.url)}, 2147483647, 0, `
    + `${lit(L.lastError)}, 99, 9007199254740991, now() - interval '400 days', `
    + "now() - interval '399 days'), "
    + `(${lit(L.biz)}, ${lit(L.key2)}, 'committed', 'failed', `
    + "decode(repeat('ff00fe01c3', 400), 'hex'), "
    + `${lit(L.topic)}, ${lit(L.fwKey)}, NULL, NULL, 0, 2147483647, ${lit(L.sendError)}, 99, 1, `
    + "now() - interval '2 days', now() - interval '1 day')");
  sql('INSERT INTO txhub.history (biz_id, message_key, event, detail, actor) VALUES '
    + `(${lit(L.biz)}, ${lit(L.key)}, 'checkback', ${lit(L.detail)}, 'txhub'), `
    + `(${lit(L.biz)}, ${lit(L.key)}, 'forward_failed', ${lit(L.detail)}, ${lit(L.actor)})`);
  sql('INSERT INTO txhub.conflicts (biz_id, message_key, arrived, met_status, detail, '
    + 'src_topic, src_partition, src_offset) VALUES '
    + `(${lit(L.biz)}, ${lit(L.key)}, 'rollback', 'committed', ${lit(L.conflict)}, `
    + `${lit(L.ctlTopic)}, 2147483647, 9007199254740991)`);
  sql('INSERT INTO txhub.rejected (src_topic, src_partition, src_offset, record_key, '
    + 'record_value, reason) VALUES '
    + `(${lit(L.ctlTopic)}, 2147483647, 9007199254740991, convert_to(${lit(L.key)}, 'UTF8'), `
    + `convert_to(${lit(L.value)}, 'UTF8'), ${lit(L.reason)}), `
    + `(${lit(L.ctlTopic)}, 2147483647, 9007199254740990, `
    + "decode(repeat('ff00fe01c3', 60), 'hex'), decode(repeat('00ff7f80c3', 400), 'hex'), "
    + `${lit(L.reason2)})`);
  // a partition row of a control topic with a long name, owner and group
  sql('INSERT INTO txhub.partitions (topic, partition, epoch, owner, next_offset, group_id, '
    + `heartbeat_at) VALUES (${lit(L.ctlTopic)}, 2147483647, 9007199254740991, `
    + `${lit(L.owner)}, 9007199254740990, ${lit(L.group)}, now())`);
}

async function startConsole() {
  const port = await freePort();
  consoleUrl = `http://127.0.0.1:${port}`;
  start(['console'], [`console.listen=127.0.0.1:${port}`, `console.token=${TOKEN}`],
    'console.log');
  await until('the console to listen', async () => {
    try {
      return (await fetch(`${consoleUrl}/static/style.css`)).ok;
    } catch {
      return false;
    }
  }, 15000);
}

// A page of another origin (another port of the same host: same site, so a
// SameSite=Strict cookie still goes along) that posts to the console.
async function startAttacker() {
  const port = await freePort();
  attackerUrl = `http://127.0.0.1:${port}/`;
  const sel = `4:shop${HOSTILE}`.replace(/&/g, '&amp;').replace(/"/g, '&quot;')
    .replace(/</g, '&lt;').replace(/>/g, '&gt;');
  const html = '<!doctype html><title>innocent</title>'
    + `<form method="post" action="${consoleUrl}/actions">`
    + '<input name="action" value="rollback">'
    + `<input name="sel" value="${sel}"><input name="back" value="/stuck"></form>`
    + '<script>document.forms[0].submit()</script>';
  attacker = http.createServer((req, res) => {
    res.writeHead(200, { 'Content-Type': 'text/html' });
    res.end(html);
  });
  await new Promise((r) => { attacker.listen(port, '127.0.0.1', r); });
}

async function startBrowser() {
  profile = fs.mkdtempSync(path.join(os.tmpdir(), 'txhub-chromium-'));
  browser = await chromium.launchPersistentContext(profile, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: { width: WIDTH, height: HEIGHT },
  });
  page = browser.pages()[0] || await browser.newPage();
  page.on('dialog', async (d) => {
    dialogs.push(d.message());
    await d.dismiss();
  });
  page.on('console', (m) => {
    if (/Content Security Policy/i.test(m.text())) cspReports.push(m.text());
  });
}

before(async () => {
  fs.mkdirSync(SHOTS, { recursive: true });
  await setUpData();
  await startConsole();
  await startAttacker();
  await startBrowser();
}, { timeout: 120000 });

after(async () => {
  if (browser) await browser.close();
  if (attacker) attacker.close();
  for (const p of procs) p.kill('SIGTERM');
  await Promise.all(procs.map((p) => new Promise((r) => {
    if (p.exitCode !== null) r(); else p.on('exit', r);
  })));
  if (profile) fs.rmSync(profile, { recursive: true, force: true });
  try { sql(`DROP DATABASE IF EXISTS ${NAME}`, PG); } catch { /* the next run drops it */ }
});

// ---- the operator ----

test('a wrong token is refused', { timeout: 30000 }, async () => {
  await page.goto(`${consoleUrl}/overview`);
  assert.match(page.url(), /\/login\?next=%2Foverview$/);
  await page.fill('#name', 'alice');
  await page.fill('#token', 'not-the-token-0123456789');
  const [resp] = await Promise.all([
    page.waitForResponse((r) => r.url().endsWith('/login') && r.request().method() === 'POST'),
    page.click('#login'),
  ]);
  assert.equal(resp.status(), 401);
  assert.match(await page.textContent('#error'), /not the console's token/);
  const cookies = await browser.cookies(consoleUrl);
  assert.ok(!cookies.some((c) => c.name === 'txhub_session'), 'no session cookie');
  await shot('login-refused');
});

test('log in; the Overview counts match txhub status --json and refresh', { timeout: 60000 },
  async () => {
    await page.fill('#name', 'alice');
    await page.fill('#token', TOKEN);
    await Promise.all([page.waitForURL(`${consoleUrl}/overview`), page.click('#login')]);
    const cookie = (await browser.cookies(consoleUrl)).find((c) => c.name === 'txhub_session');
    assert.ok(cookie && cookie.httpOnly && cookie.sameSite === 'Strict', 'HttpOnly, Strict');
    assert.equal(await page.textContent('#user'), 'console:alice');

    const status = JSON.parse(txhub(['status', '--json']));
    const fields = await page.$$eval('[data-field]',
      (els) => els.map((e) => [e.dataset.field, e.textContent]));
    assert.ok(fields.length >= 15, `${fields.length} numbers on the page`);
    for (const [p, text] of fields) {
      const want = p.split('.').reduce((o, k) => o[k], status);
      assert.equal(text, String(want), p);
    }
    // hostile, order-1 and the long row of the set-up
    assert.equal(await page.textContent('[data-field="messages.check_failed"]'), '3');

    // refreshed without a reload: a mark on the window survives, the time moves
    const before = await page.textContent('#read-at');
    await page.evaluate(() => { window.txhubTestMark = 1; });
    await page.waitForFunction((t) => document.getElementById('read-at').textContent !== t,
      before, { timeout: 15000 });
    assert.equal(await page.evaluate(() => window.txhubTestMark), 1, 'no reload');
    // the parked rows were rebuilt by app.js (textContent): the key is text
    const keys = await page.$$eval('#parked a.key', (as) => as.map((a) => a.textContent));
    assert.ok(keys.includes(HOSTILE), JSON.stringify(keys));
    assert.equal(await page.locator('img').count(), 0);
    await shot('overview');
  });

test('the hostile key renders as text on Stuck', { timeout: 30000 }, async () => {
  await page.goto(`${consoleUrl}/stuck`);
  const link = page.locator('#stuck a.key', { hasText: HOSTILE });
  assert.equal(await link.count(), 1);
  assert.equal(await link.textContent(), HOSTILE);
  assert.equal(await page.locator('img').count(), 0, 'no img element');
  assert.equal(await page.locator('svg').count(), 0);
  assert.deepEqual(dialogs, [], 'no dialog fired');
  await shot('stuck');
});

test('resolve a check_failed row: it is forwarded', { timeout: 60000 }, async () => {
  await page.goto(`${consoleUrl}/stuck`);
  await rowBox('order-1').check();
  await page.fill('#reason', REASON);
  await Promise.all([page.waitForURL(`${consoleUrl}/stuck`), page.click('button.commit')]);
  assert.match(await page.textContent('#flash'), /1 done, 0 not/);
  assert.match(await page.textContent('#flash'), /shop \/ order-1: committed, send pending/);
  await until('order-1 to be sent', () => sql("SELECT send_status FROM txhub.messages "
    + "WHERE message_key = 'order-1'") === 'sent');
  const records = await until('order-1 on the forward topic',
    () => forwarded().split('\n').find((l) => l.startsWith('order-1 ')));
  assert.equal(records, 'order-1 {"order_id":1,"total":"42.00"}');
});

test('redrive a failed send: it is sent', { timeout: 60000 }, async () => {
  assert.ok(!forwarded().includes('order-2 '), 'never sent before');
  await page.goto(`${consoleUrl}/stuck`);
  assert.equal(await rowBox('order-2').count(), 1);
  await rowBox('order-2').check();
  await Promise.all([page.waitForURL(`${consoleUrl}/stuck`), page.click('button.redrive')]);
  assert.match(await page.textContent('#flash'), /redrive by console:alice: 1 done/);
  await until('order-2 to be sent', () => sql("SELECT send_status FROM txhub.messages "
    + "WHERE message_key = 'order-2'") === 'sent');
  const line = await until('order-2 on the forward topic',
    () => forwarded().split('\n').find((l) => l.startsWith('order-2 ')));
  assert.equal(line, 'order-2 {"order_id":2}');
});

test('skip a parked forward: a reason is required, then it is skipped', { timeout: 60000 },
  async () => {
    // parked in partition 99, which no hub owns: only the skip changes it
    sql('INSERT INTO txhub.messages (biz_id, message_key, status, send_status, payload, '
      + 'forward_topic, forward_key, send_attempts, last_error, src_partition, src_offset) '
      + `VALUES ('shop', 'order-9', 'committed', 'failed', 'p', '${FW}', 'order-9', 15, `
      + "'denied', 99, 2)");
    await page.goto(`${consoleUrl}/message?biz=shop&key=order-9`);
    assert.equal(await page.locator('button.skip').count(), 1);
    // no reason: refused, nothing done
    await Promise.all([page.waitForURL(`${consoleUrl}/actions`), page.click('button.skip')]);
    assert.match(await page.textContent('body'), /a skip needs a reason/);
    assert.equal(sql("SELECT send_status FROM txhub.messages WHERE message_key = 'order-9'"),
      'failed');
    await page.goto(`${consoleUrl}/message?biz=shop&key=order-9`);
    await page.fill('#reason', 'refunded, ticket OPS-9');
    await Promise.all([page.waitForURL(/\/message\?/), page.click('button.skip')]);
    assert.match(await page.textContent('#flash'), /skip by console:alice: 1 done, 0 not/);
    assert.equal(sql("SELECT send_status FROM txhub.messages WHERE message_key = 'order-9'"),
      'skipped');
    assert.equal(sql("SELECT detail || ' / ' || actor FROM txhub.history "
      + "WHERE message_key = 'order-9' AND event = 'skip'"),
    'send failed -> skipped: refunded, ticket OPS-9 / console:alice');
    assert.equal(await page.locator('button.skip').count(), 0, 'nothing left to skip');
    await shot('skip');
  });

test('search, open a message and read its history', { timeout: 30000 }, async () => {
  await page.fill('header input[name=key]', 'order-1');
  await Promise.all([page.waitForURL(/\/search\?/), page.click('header form.search button')]);
  assert.equal(await page.textContent('#count'), '1 message(s)');
  await shot('search');
  await Promise.all([page.waitForURL(/\/message\?/), page.click('#results a.key')]);
  const rows = await page.$$eval('#history tbody tr',
    (trs) => trs.map((tr) => Array.from(tr.cells, (c) => c.textContent)));
  const resolve = rows.find((r) => r[1] === 'resolve');
  assert.ok(resolve, JSON.stringify(rows));
  assert.equal(resolve[2], 'console:alice');
  assert.equal(resolve[3], `commit (was check_failed): ${REASON}`);
  assert.ok(rows.some((r) => r[1] === 'checkback' || r[1] === 'alert'), 'the hub\'s own rows');
  assert.equal(rows[rows.length - 1][1], 'sent');
  await shot('message');
});

test('the hostile message: payload and headers as text, then as hex', { timeout: 30000 },
  async () => {
    await page.goto(`${consoleUrl}/stuck`);
    await Promise.all([page.waitForURL(/\/message\?/),
      page.click('#stuck a.key', { hasText: HOSTILE })]);
    assert.equal(await page.textContent('[data-field="message_key"]'), HOSTILE);
    assert.equal(await page.textContent('#payload pre'),
      '{"note":"<script>alert(2)</script>"}');
    assert.match(await page.textContent('#fields'), /x-note: "><svg onload=alert\(3\)>/);
    assert.equal(await page.locator('img, svg').count(), 0);
    assert.equal(await page.locator('script').count(), 1, 'only app.js');
    await shot('message-hostile');
    await Promise.all([page.waitForURL(/view=hex/), page.click('#as-hex')]);
    assert.match(await page.textContent('#payload pre.hex'), /3c 73 63 72 69 70 74/);
  });

test('find a rejected record', { timeout: 30000 }, async () => {
  await page.click('nav a[href="/rejected"]');
  await page.waitForURL(`${consoleUrl}/rejected`);
  const row = page.locator('#rejected tbody tr').filter({ hasText: 'invalid JSON' });
  assert.match(await row.textContent(), /invalid JSON/);
  assert.equal(await row.locator('td.value').nth(1).textContent(),
    'not json <script>alert(5)</script>');
  assert.equal(await row.locator('td.value').nth(0).textContent(), '<b>k</b>');
  assert.equal(await page.locator('script').count(), 1, 'only app.js');
  await shot('rejected');
  await Promise.all([page.waitForURL(/\/rejected\?id=/), row.locator('a').first().click()]);
  assert.equal(await page.textContent('#value pre'), 'not json <script>alert(5)</script>');
  await shot('rejected-record');
});

test('the conflicts, newest first', { timeout: 30000 }, async () => {
  await page.click('nav a[href="/conflicts"]');
  await page.waitForURL(`${consoleUrl}/conflicts`);
  // the long row of the set-up is newer: it comes first
  const rows = await page.$$eval('#conflicts tbody tr',
    (trs) => trs.map((tr) => Array.from(tr.cells, (td) => td.textContent)));
  assert.equal(rows[0][2], LONG.biz);
  const cells = rows[1];
  assert.equal(cells[3], 'order-3');
  assert.equal(cells[4], 'rollback');
  assert.equal(cells[5], 'committed');
  await shot('conflicts');
});

// ---- every page fits the screen (issue 19, item 10) ----

// The page's width: wider than the window means scrolling sideways.
async function pageWidth() {
  return page.evaluate(() => document.documentElement.scrollWidth);
}

// Some element of the page carries v whole in its title (a value cut on
// the page can be read whole by pointing at it).
async function hasTitle(v) {
  return page.evaluate((want) => Array.from(document.querySelectorAll('[title]'))
    .some((e) => e.title === want), v);
}

test('every page fits 1280 px with long values in every column', { timeout: 120000 },
  async () => {
    await page.setViewportSize({ width: WIDTH, height: HEIGHT });
    const q = (o) => new URLSearchParams(o).toString();
    const ids = sql('SELECT string_agg(id::text, \' \' ORDER BY id) FROM txhub.rejected '
      + `WHERE src_topic = ${lit(LONG.ctlTopic)}`).split(' ');
    const paths = ['/overview', '/stuck', `/stuck?${q({ biz: LONG.biz })}`,
      `/search?${q({ biz: LONG.biz })}`, `/search?${q({ key: LONG.key })}`,
      LONG_MESSAGE, `${LONG_MESSAGE}&view=hex`, `/message?${q({ biz: LONG.biz, key: LONG.key2 })}`,
      `/message?${q({ biz: LONG.biz, key: unbroken('nosuchkey', 255) })}`,
      `/stuck?${q({ age: unbroken('age', 300) })}`,
      '/rejected', `/rejected?id=${ids[0]}`, `/rejected?id=${ids[0]}&view=hex`,
      `/rejected?id=${ids[1]}`, '/conflicts', `/conflicts?${q({ biz: LONG.biz, key: LONG.key })}`];
    const widths = {};
    for (const p of paths) {
      await page.goto(consoleUrl + p);
      widths[p.slice(0, 60)] = await pageWidth();
    }
    await page.goto(`${consoleUrl}/rejected`);
    await page.screenshot({ path: path.join(SHOTS, 'rejected-1280x800.png') });

    // the Overview again after app.js rebuilt its tables
    await page.goto(`${consoleUrl}/overview`);
    const readAt = await page.textContent('#read-at');
    await page.waitForFunction((t) => document.getElementById('read-at').textContent !== t,
      readAt, { timeout: 15000 });
    widths['/overview, refreshed'] = await pageWidth();
    await shot('overview-long');

    // resolve the long row with a long reason: the flash, then its history
    await page.goto(`${consoleUrl}/stuck`);
    await rowBox(LONG.key).check();
    await page.fill('#reason', LONG.resolve);
    await Promise.all([page.waitForURL(`${consoleUrl}/stuck`), page.click('button.commit')]);
    assert.match(await page.textContent('#flash'), /1 done, 0 not/);
    widths['/stuck, the flash of a resolve'] = await pageWidth();
    await shot('stuck-long');
    await page.goto(consoleUrl + LONG_MESSAGE);
    widths['/message, after the resolve'] = await pageWidth();
    await shot('message-long');

    const wide = Object.entries(widths).filter(([, w]) => w > WIDTH);
    assert.deepEqual(wide, [], `pages wider than ${WIDTH} px: ${JSON.stringify(widths)}`);
  });

test('long values are cut with a way to read them whole', { timeout: 60000 }, async () => {
  // the Overview as app.js rebuilt it
  await page.goto(`${consoleUrl}/overview`);
  const readAt = await page.textContent('#read-at');
  await page.waitForFunction((t) => document.getElementById('read-at').textContent !== t,
    readAt, { timeout: 15000 });
  for (const v of [LONG.biz, LONG.key2, LONG.sendError, LONG.ctlTopic, LONG.owner, LONG.group]) {
    assert.ok(await hasTitle(v), `refreshed Overview: ${v.slice(0, 30)}... whole in a title`);
  }

  await page.goto(`${consoleUrl}/stuck`);
  for (const v of [LONG.biz, LONG.key2, LONG.sendError]) {
    assert.ok(await hasTitle(v), `Stuck: ${v.slice(0, 30)}... whole in a title`);
  }
  // the key's link opens the message, where every field is whole as text
  await Promise.all([page.waitForURL(/\/message\?/),
    page.locator('#stuck a.key', { hasText: LONG.key2 }).click()]);
  assert.equal(await page.textContent('[data-field="message_key"]'), LONG.key2);
  assert.equal(await page.textContent('[data-field="last_error"]'), LONG.sendError);
  assert.equal(await page.textContent('[data-field="forward_topic"]'), LONG.topic);

  await page.goto(consoleUrl + LONG_MESSAGE);
  const detail = await page.$$eval('#history tbody tr',
    (trs) => trs.map((tr) => Array.from(tr.cells, (td) => td.textContent)));
  assert.ok(detail.some((r) => r[3] === `commit (was check_failed): ${LONG.resolve}`),
    'the resolve, whole as text');
  assert.ok(detail.some((r) => r[2] === LONG.actor && r[3] === LONG.detail),
    'the long actor and detail, whole as text');
  assert.ok((await page.textContent('#fields')).includes(`${LONG.header}: ${LONG.headerValue}`),
    'the forward header whole');

  // Rejected: the reason has room, is whole in a title, and the record's
  // own page (the id's link) shows everything
  await page.goto(`${consoleUrl}/rejected`);
  const src = `${LONG.ctlTopic} / 2147483647 / 9007199254740991`;
  for (const v of [LONG.reason, LONG.reason2, src]) {
    assert.ok(await hasTitle(v), `Rejected: ${v.slice(0, 30)}... whole in a title`);
  }
  const row = page.locator('#rejected tbody tr').filter({ hasText: 'invalid envelope' });
  const reasonWidth = await row.locator('td').nth(3)
    .evaluate((td) => td.getBoundingClientRect().width);
  assert.ok(reasonWidth >= 240, `the reason column is ${reasonWidth} px wide`);
  await Promise.all([page.waitForURL(/\/rejected\?id=/), row.locator('a').first().click()]);
  assert.equal(await page.textContent('[data-field="reason"]'), LONG.reason);
  assert.equal(await page.textContent('[data-field="src_topic"]'), LONG.ctlTopic);
  assert.equal(await page.textContent('#value pre'), LONG.value);

  await page.goto(`${consoleUrl}/conflicts`);
  for (const v of [LONG.conflict, src, LONG.biz, LONG.key]) {
    assert.ok(await hasTitle(v), `Conflicts: ${v.slice(0, 30)}... whole in a title`);
  }
  await shot('conflicts-long');
});

test('a cross-site POST is refused', { timeout: 30000 }, async () => {
  const before = sql('SELECT status || count(*) OVER () FROM txhub.messages '
    + `WHERE message_key = '${HOSTILE.replace(/'/g, "''")}'`);
  const [resp] = await Promise.all([
    page.waitForResponse((r) => r.url() === `${consoleUrl}/actions`),
    page.goto(attackerUrl),
  ]);
  assert.equal(resp.status(), 403);
  assert.match(await resp.text(), /another (site|origin)/);
  const after = sql('SELECT status || count(*) OVER () FROM txhub.messages '
    + `WHERE message_key = '${HOSTILE.replace(/'/g, "''")}'`);
  assert.equal(after, before);
  assert.equal(after, 'check_failed1');
  assert.equal(sql("SELECT count(*) FROM txhub.history WHERE event = 'resolve' "
    + "AND detail LIKE 'rollback%'"), '0');
});

test('log out', { timeout: 30000 }, async () => {
  await page.goto(`${consoleUrl}/overview`);
  await Promise.all([page.waitForURL(`${consoleUrl}/login`),
    page.click('header form.user button')]);
  await page.goto(`${consoleUrl}/stuck`);
  assert.match(page.url(), /\/login\?next=%2Fstuck$/);
  assert.ok(await pageWidth() <= WIDTH, 'the login page fits the window');
  assert.deepEqual(dialogs, [], 'no dialog fired in the whole run');
  assert.deepEqual(cspReports, [], 'our pages broke no Content-Security-Policy rule');
});

// ---- tenants (docs/tenants.md: Sharing one hub between teams): the Tenants page and a
// console token of one ----

async function loginAs(name, token) {
  await page.goto(`${consoleUrl}/login`);
  await page.fill('#name', name);
  await page.fill('#token', token);
  await Promise.all([page.waitForURL(`${consoleUrl}/overview`), page.click('#login')]);
}

test('the Tenants page, and a tenant token that sees its own tenant only', { timeout: 60000 },
  async () => {
    txhub(['tenant', 'add', 'team-a', '--control-topic', `ctl.team-a.${NAME}`,
      '--biz', 'a-shop', 'a-ledger*', '--forward-topic', 'fw.team-a', 'team-a.out.*',
      '--checkback-allow', 'https://a.example/cb/', '--max-envelope-bytes', '65536']);
    txhub(['tenant', 'add', 'team-b', '--control-topic', '^team-b\\.',
      '--biz', 'b-shop', '--forward-topic', 'fw.team-b']);
    const tokenA = txhub(['tenant', 'token', 'team-a']).trim();
    sql('INSERT INTO txhub.messages (biz_id, message_key, status, send_status, payload, '
      + 'forward_topic, check_attempts, send_attempts, last_error, src_partition, src_offset, '
      + 'created_at, updated_at, tenant) VALUES '
      + "('a-shop', 'a-order-1', 'check_failed', NULL, 'p', 'fw.team-a', 3, 0, "
      + "'check-back answered 503', 98, 1, now() - interval '1 hour', now() - interval '50 minutes', 'team-a'), "
      + "('a-shop', 'a-order-2', 'committed', 'sent', 'p', 'fw.team-a', 0, 1, NULL, 98, 2, "
      + "now() - interval '20 seconds', now() - interval '10 seconds', 'team-a'), "
      + `('b-shop', 'b-order-1', 'committed', 'failed', 'p', 'fw.team-b', 0, 15, ${lit(LONG.sendError)}, `
      + "98, 3, now() - interval '1 hour', now() - interval '40 minutes', 'team-b')");
    sql('INSERT INTO txhub.rejected (src_topic, src_partition, src_offset, record_key, '
      + 'record_value, reason, tenant) VALUES '
      + `('ctl.team-a', 0, 5, 'k', 'v', 'biz_id "z-shop" is not a biz_id of tenant team-a', 'team-a'), `
      + `('team-b.ctl', 0, 5, 'k', 'v', ${lit(LONG.reason)}, 'team-b')`);

    // the global session (logged out above): every tenant
    await loginAs('root', TOKEN);
    await page.goto(`${consoleUrl}/tenants`);
    assert.equal(await page.locator('section.tenant').count(), 2);
    assert.match(await page.textContent('#tenant-team-a'), /a-ledger\*/);
    assert.match(await page.textContent('#parked-team-b'), /b-order-1/);
    assert.ok(await pageWidth() <= WIDTH, `the Tenants page is ${await pageWidth()} px wide`);
    await shot('tenants-global');
    await page.goto(`${consoleUrl}/stuck?tenant=team-b`);
    assert.match(await page.textContent('#stuck'), /b-order-1/);
    assert.doesNotMatch(await page.textContent('#stuck'), /a-order-1/);
    await Promise.all([page.waitForURL(`${consoleUrl}/login`),
      page.click('header form.user button')]);

    // team-a's token: its name in the header, its rows only, its tenant only
    await loginAs('alice', tokenA);
    assert.equal(await page.textContent('#tenant'), 'tenant team-a');
    await page.goto(`${consoleUrl}/stuck`);
    assert.match(await page.textContent('#stuck'), /a-order-1/);
    assert.doesNotMatch(await page.content(), /b-order-1|team-b/);
    await page.goto(`${consoleUrl}/tenants`);
    assert.equal(await page.locator('section.tenant').count(), 1);
    assert.match(await page.textContent('#rejections-team-a'), /not a biz_id of tenant team-a/);
    assert.doesNotMatch(await page.content(), /team-b/);
    assert.ok(await pageWidth() <= WIDTH, `the Tenants page is ${await pageWidth()} px wide`);
    await shot('tenants-scoped');
    const resp = await page.goto(`${consoleUrl}/message?biz=b-shop&key=b-order-1`);
    assert.equal(resp.status(), 404);
    assert.deepEqual(dialogs, [], 'no dialog fired');
    assert.deepEqual(cspReports, [], 'no Content-Security-Policy rule broken');
  });
