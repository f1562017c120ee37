-- The wrk script of `.ci/serve-bench`: on every connection, an admit, then the settle of
-- the reservation its answer names. The same requests go to `holon serve` and to the floor
-- (benches/serve_floor.rs). HOLON_BENCH_TOKEN is the gateway's token. With
-- HOLON_BENCH_KEYS=1 every request carries an Idempotency-Key of its own, as a gateway that
-- retries safely sends (the floors ignore it); HOLON_BENCH_RUN makes the keys of each run
-- new (a key seen before would be replayed).
local headers = {
  ["Authorization"] = "Bearer " .. (os.getenv("HOLON_BENCH_TOKEN") or ""),
  ["Content-Type"] = "application/json",
}
local keys = os.getenv("HOLON_BENCH_KEYS") == "1"
local run = os.getenv("HOLON_BENCH_RUN") or "run"
local admit_body = '{"mandate":"bench/m","agent":"acme/table-extract"}'
local admit = wrk.format("POST", "/v1/admit", headers, admit_body)
local settle_body = '{"actual":"0.004"}'
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  math.randomseed(os.time())
  prefix = run .. "-" .. math.random(1, 1000000000) .. "-"
  sent = 0
  queue = {}
  admits = 0
  settles = 0
  unexpected = 0
end

-- The headers of the next request: with keys, a new Idempotency-Key.
local function next_headers()
  sent = sent + 1
  local h = {}
  for k, v in pairs(headers) do h[k] = v end
  h["Idempotency-Key"] = prefix .. sent
  return h
end

function request()
  local id = table.remove(queue)
  if id then
    return wrk.format("POST", "/v1/reservations/" .. id .. "/settle", keys and next_headers() or headers, settle_body)
  end
  if keys then
    return wrk.format("POST", "/v1/admit", next_headers(), admit_body)
  end
  return admit
end

function response(status, headers, body)
  local id = body:match('"reservation":"(%d+)"')
  if id and body:match('"decision":"allowed"') then
    table.insert(queue, id)
    admits = admits + 1
  elseif status == 200 and body:match('"receipt"') then
    settles = settles + 1
  else
    unexpected = unexpected + 1
  end
end

function done(summary, latency, requests)
  local a, s, u = 0, 0, 0
  for _, t in ipairs(threads) do
    a = a + t:get("admits")
    s = s + t:get("settles")
    u = u + t:get("unexpected")
  end
  io.write(string.format(
    '{"requests":%d,"per_s":%.0f,"admits":%d,"settles":%d,"unexpected":%d,"errors":%d,"p50_us":%d,"p99_us":%d}\n',
    summary.requests, summary.requests / (summary.duration / 1e6), a, s, u,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.status + summary.errors.timeout,
    latency:percentile(50), latency:percentile(99)))
end
