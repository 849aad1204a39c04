//! The shared tier's Lua scripts. Each touches the keys of one URL only (one hash slot, see
//! `layout.rs`), so Redis Cluster runs it on one master, atomically: a reader sees a variant's
//! metadata and index entry from the same commit, and a commit or a purge is all or nothing.
//!
//! Each declares one key, the URL's index (`P{h}i`), and names the others from the base
//! `P{h}` it is given: during a resharding the importing node runs a script only when every
//! declared key is there (TRYAGAIN otherwise), and a lease or a metadata record often is not.
//!
//! Positions (`ms-seq`) are ids of the fleet's invalidation log (`feed.rs`): a purge leaves
//! its position on the URL (`P{h}p`), and a commit whose writer had not yet applied that
//! position when it started fetching is refused — a fill that raced a purge is never stored.

use super::remote::Script;

/// Shared by the scripts: is position `a` after position `b` (`ms-seq`, `0-0` if absent)?
macro_rules! lua {
    ($body:literal) => {
        concat!(
            r#"
local function pos(s)
  local ms, seq = string.match(s or '0-0', '^(%d+)-(%d+)$')
  return tonumber(ms or 0), tonumber(seq or 0)
end
local function after(a, b)
  local am, as = pos(a)
  local bm, bs = pos(b)
  return am > bm or (am == bm and as > bs)
end
local function drop_variant(index, chunk_base, meta_base, field)
  local entry = redis.call('HGET', index, field)
  local n = redis.call('DEL', meta_base .. field)
  if entry then
    local gen, count = string.match(entry, '^(%x+) (%d+)$')
    if gen then
      for c = 0, tonumber(count) - 1 do
        redis.call('DEL', chunk_base .. field .. '.' .. gen .. '.' .. c)
      end
    end
    redis.call('HDEL', index, field)
  end
  return n
end
"#,
            $body
        )
    };
}

/// KEYS: index. ARGV: base, variant (hex), lease token (`""`: no lease), lease ms, `1` when
/// the key is a primary key (a URL that varies then answers `vary`).
/// Returns `{meta|nil, names|nil, word, soft|nil}`, word one of `hit`, `vary`, `miss`,
/// `lease` (this caller now holds it), `held` (another node fetches), `pass` (uncacheable);
/// with `hit`, `soft` is the URL's last soft purge (wall ms, [`SOFT_PURGE`]).
pub static LOOKUP: Script = Script {
    name: "lookup",
    source: lua!(
        r#"
local names = redis.call('HGET', KEYS[1], 'names')
if names and ARGV[5] == '1' then
  return {false, names, 'vary'}
end
local meta = redis.call('GET', ARGV[1] .. 'm' .. ARGV[2])
if meta then
  return {meta, names, 'hit', redis.call('GET', ARGV[1] .. 's')}
end
local lease = ARGV[1] .. 'l' .. ARGV[2]
local held = redis.call('GET', lease)
if held == 'pass' then
  return {false, names, 'pass'}
end
if ARGV[3] == '' then
  return {false, names, 'miss'}
end
if not held then
  redis.call('SET', lease, ARGV[3], 'PX', ARGV[4])
  return {false, names, 'lease'}
end
if held == ARGV[3] then
  return {false, names, 'lease'}
end
return {false, names, 'held'}
"#
    ),
};

/// KEYS: index. ARGV: ttl ms, then (chunk key, value) pairs.
pub static PUT_CHUNKS: Script = Script {
    name: "put_chunks",
    source: lua!(
        r#"
for i = 2, #ARGV, 2 do
  redis.call('SET', ARGV[i], ARGV[i + 1], 'PX', ARGV[1])
end
return (#ARGV - 1) / 2
"#
    ),
};

/// KEYS: index. ARGV: meta record, ttl ms, variant (hex), generation (hex), chunks, Vary
/// names (`-`: none), base, the writer's position when it started fetching, lease token.
/// Returns 1 (committed), -1 (a purge came after the writer's position: refused), -2 (a
/// chunk is missing: refused).
pub static COMMIT: Script = Script {
    name: "commit",
    source: lua!(
        r#"
local base = ARGV[7]
local chunk_base, meta_base = base .. 'c', base .. 'm'
local lease = base .. 'l' .. ARGV[3]
local mark = redis.call('GET', base .. 'p')
local function release()
  if ARGV[9] ~= '' and redis.call('GET', lease) == ARGV[9] then
    redis.call('DEL', lease)
  end
end
if mark and after(mark, ARGV[8]) then
  release()
  return -1
end
local count = tonumber(ARGV[5])
for c = 0, count - 1 do
  if redis.call('EXISTS', chunk_base .. ARGV[3] .. '.' .. ARGV[4] .. '.' .. c) == 0 then
    release()
    return -2
  end
end
local old = redis.call('HGET', KEYS[1], ARGV[3])
if old then
  local gen, n = string.match(old, '^(%x+) (%d+)$')
  if gen and gen ~= ARGV[4] then
    for c = 0, tonumber(n) - 1 do
      redis.call('DEL', chunk_base .. ARGV[3] .. '.' .. gen .. '.' .. c)
    end
  end
end
redis.call('SET', meta_base .. ARGV[3], ARGV[1], 'PX', ARGV[2])
redis.call('HSET', KEYS[1], ARGV[3], ARGV[4] .. ' ' .. ARGV[5])
if ARGV[6] ~= '-' then
  redis.call('HSET', KEYS[1], 'names', ARGV[6])
  if ARGV[3] ~= '0' then
    drop_variant(KEYS[1], chunk_base, meta_base, '0')
  end
else
  redis.call('HDEL', KEYS[1], 'names')
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
release()
return 1
"#
    ),
};

/// KEYS: index. ARGV: base, position of the purge, how long the mark is kept (ms). Removes
/// every variant; returns how many metadata records went.
pub static PURGE: Script = Script {
    name: "purge",
    source: lua!(
        r#"
local chunk_base, meta_base, mark_key = ARGV[1] .. 'c', ARGV[1] .. 'm', ARGV[1] .. 'p'
local fields = redis.call('HKEYS', KEYS[1])
local n = 0
for _, f in ipairs(fields) do
  if f ~= 'names' then
    n = n + drop_variant(KEYS[1], chunk_base, meta_base, f)
  end
end
n = n + redis.call('DEL', meta_base .. '0')
redis.call('DEL', KEYS[1])
local mark = redis.call('GET', mark_key)
if not mark or after(ARGV[2], mark) then
  redis.call('SET', mark_key, ARGV[2], 'PX', ARGV[3])
end
return n
"#
    ),
};

/// KEYS: index. ARGV: base, the soft purge's moment (wall ms). Marks the URL soft-purged at
/// that moment (`P{h}s`, the latest mark kept) for as long as any copy of it lives; readers
/// treat copies stored until then as stale from then (`SharedMeta::soft_purged`), so other nodes
/// still serve them in grace and revalidate them. Returns the copies it concerns.
pub static SOFT_PURGE: Script = Script {
    name: "soft_purge",
    source: lua!(
        r#"
local meta_base, mark_key = ARGV[1] .. 'm', ARGV[1] .. 's'
local keys = {meta_base .. '0'}
for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do
  if f ~= 'names' and f ~= '0' then
    table.insert(keys, meta_base .. f)
  end
end
local n, longest = 0, 0
for _, k in ipairs(keys) do
  local t = redis.call('PTTL', k)
  if t > 0 then
    n = n + 1
    if t > longest then
      longest = t
    end
  end
end
if n == 0 then
  return 0
end
local old = redis.call('GET', mark_key)
local mark = ARGV[2]
if old and tonumber(old) > tonumber(mark) then
  mark = old
end
local left = redis.call('PTTL', mark_key)
if left > longest then
  longest = left
end
redis.call('SET', mark_key, mark, 'PX', longest)
return n
"#
    ),
};

/// KEYS: lease. ARGV: token, `pass` ms (0: just release). An uncacheable answer leaves `pass`
/// for that long so other nodes fetch at once instead of queueing for the lease.
pub static RELEASE: Script = Script {
    name: "release",
    source: lua!(
        r#"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
if tonumber(ARGV[2]) > 0 then
  redis.call('SET', KEYS[1], 'pass', 'PX', ARGV[2])
else
  redis.call('DEL', KEYS[1])
end
return 1
"#
    ),
};

/// KEYS: a tag's set. ARGV: member, ttl ms. The set lives as long as its longest-lived URL.
pub static TAG_ADD: Script = Script {
    name: "tag_add",
    source: lua!(
        r#"
redis.call('SADD', KEYS[1], ARGV[1])
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 1
"#
    ),
};
