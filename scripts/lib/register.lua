-- wrk script: each thread registers its own devices (ids and tokens from a per-thread counter, all tagged "bench")
-- in app $APP (default demo) with the app key $APP_KEY. With QUOTA set, a thread sends QUOTA registrations, then only
-- GET /health, so exactly QUOTA × threads devices end up registered if wrk runs long enough.
local counter = 0
local thread_id = 0
local threads = {}
local quota = tonumber(os.getenv("QUOTA") or "0")
local key = os.getenv("APP_KEY")
local app = os.getenv("APP") or "demo"
function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end
function init(args)
  thread_id = tid
end
function request()
  -- wrk calls request() once on its first thread to check the script, and sends nothing for that call.
  local sent = counter - (thread_id == 0 and 1 or 0)
  if quota > 0 and sent >= quota then
    return wrk.format("GET", "/health")
  end
  counter = counter + 1
  local id = string.format("6f1c1f9e-8d7a-4d44-%04x-%012x", thread_id, counter)
  local token = string.format("%056x%08x", thread_id, counter)
  local body = '{"token":"' .. token .. '","environment":"production","tags":["bench"]}'
  return wrk.format("PUT", "/v1/apps/" .. app .. "/devices/" .. id,
    {["Authorization"] = "Bearer " .. key, ["Content-Type"] = "application/json"}, body)
end
