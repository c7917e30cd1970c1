-- wrk script: N requests per write, answered in order (HTTP/1.1 pipelining):
--   wrk -t2 -c64 -s bench/pipeline.lua http://127.0.0.1:PORT/ -- 16
-- wrk reads every response, so its counts and latencies are per request batch's responses.
init = function(args)
  local r = {}
  for i = 1, tonumber(args[1] or 16) do r[i] = wrk.format() end
  req = table.concat(r)
end
request = function() return req end
