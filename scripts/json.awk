# json.awk - field access in the flat JSON objects spoke-bench --json prints,
# one per line (no nesting but the "hist" array, read raw). For awk programs
# of scripts/plot.sh and scripts/bench_tables.sh, which put this file in
# front of their own text. mawk is enough.
# The text after "key": in a flat JSON object ("" if the key is absent).
function jraw(line, key,   i) {
  i = index(line, "\"" key "\":")
  return i ? substr(line, i + length(key) + 3) : ""
}
function jnum(line, key,   s) {
  s = jraw(line, key)
  if (!match(s, /^-?[0-9][0-9.eE+-]*/)) return ""
  return substr(s, 1, RLENGTH)
}
function jstr(line, key,   s, r, c, i) {
  s = jraw(line, key)
  if (substr(s, 1, 1) != "\"") return ""
  r = ""
  for (i = 2; i <= length(s); i++) {
    c = substr(s, i, 1)
    if (c == "\\") { i++; r = r substr(s, i, 1); continue }
    if (c == "\"") break
    r = r c
  }
  return r
}
