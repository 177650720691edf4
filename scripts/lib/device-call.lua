-- wrk script: each seeded device makes one call in turn, with the app key $APP_KEY and the device secret $SECRET every
-- seeded device shares (scripts/lib/seed.sh). The devices are 6f1c1f9e-8d7a-4d44-9d2e-<n as 12 hex digits>,
-- n = 1…$DEVICES; the threads take turns through them (thread t sends devices t+1, t+1+threads, …), each device once
-- per round.
--   METHOD   POST (default) or PUT…
--   CALL     the path after the device's id: opens (default), push-tokens/voip…
--   BODY     the JSON body; a %08x in it becomes n (a token of each device's own)
-- bench-reports.sh: POST opens {"pushId": …}; bench-voip.sh: PUT push-tokens/voip {"token": …}.
local threads = {}
local thread_id = 0
local thread_count = tonumber(os.getenv("THREADS") or "2")
local next_device = 0
local checked = false
local devices = tonumber(os.getenv("DEVICES") or "1")
local key = os.getenv("APP_KEY")
local secret = os.getenv("SECRET")
local method = os.getenv("METHOD") or "POST"
local call = os.getenv("CALL") or "opens"
local body = os.getenv("BODY") or "{}"
function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end
function init(args)
  thread_id = tid
  next_device = thread_id
end
function request()
  local n = next_device % devices + 1
  -- wrk calls request() once on its first thread to check the script, and sends nothing for that call.
  if thread_id == 0 and not checked then
    checked = true
  else
    next_device = next_device + thread_count
  end
  return wrk.format(method, string.format("/v1/apps/demo/devices/6f1c1f9e-8d7a-4d44-9d2e-%012x/", n) .. call,
    {["Authorization"] = "Bearer " .. key, ["X-Tern-Device-Secret"] = secret, ["Content-Type"] = "application/json"},
    (string.gsub(body, "%%08x", string.format("%08x", n))))
end
