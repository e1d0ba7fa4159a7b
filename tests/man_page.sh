#!/bin/sh
# The man page doc/hytree.1 renders without a single groff warning, and it
# names every subcommand and every environment variable the sources read
# (getenv("...") in src/*.c), and that src/ reads no other environment
# variables than HYTREE_NUM_THREADS, HYTREE_KERNEL_DIR, HYTREE_TRACE,
# TMPDIR and the test hooks HYTREE_TEST_*. Skips (77) when neither man nor
# groff exists.
: "${top_srcdir:=.}"
page="$top_srcdir/doc/hytree.1"
[ -r "$page" ] || { echo "FAIL: $page missing"; exit 1; }
fail=0

if command -v groff >/dev/null 2>&1; then
  # -ww: all warnings; -z: no output; groff exits 0 even with warnings, so
  # any text on stderr is the failure.
  warn=$(groff -ww -z -man -Tutf8 "$page" 2>&1) || { echo "FAIL: groff exited $?"; fail=1; }
  text=$(groff -man -Tutf8 -P-cbou "$page" 2>/dev/null)
elif command -v man >/dev/null 2>&1; then
  warn=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
  text=$(MANWIDTH=80 MANPAGER=cat PAGER=cat man -l "$page" 2>/dev/null)
else
  echo "SKIP: neither groff nor man is installed"
  exit 77
fi
if [ -n "$warn" ]; then
  echo "FAIL: warnings while rendering $page:"
  echo "$warn"
  fail=1
fi
[ -n "$text" ] || { echo "FAIL: $page renders to nothing"; exit 1; }

# The source is searched too: rendering may hyphenate a long name.
check() {
  if ! printf '%s\n' "$text" | grep -q -e "$1" && ! grep -q -e "$1" "$page"; then
    echo "FAIL: $page does not mention $2"
    fail=1
  fi
}
for cmd in run ic devices bench; do
  check "hytree $cmd" "the subcommand '$cmd'"
done
vars=$(grep -o 'getenv("[A-Za-z0-9_]*")' "$top_srcdir"/src/*.c | sed 's/.*getenv("\(.*\)")/\1/' | sort -u)
[ -n "$vars" ] || { echo "FAIL: no getenv() found in $top_srcdir/src"; fail=1; }
for v in $vars; do
  printf '%s\n' "$text" | grep -q -w -e "$v" || { echo "FAIL: environment variable $v is not in $page"; fail=1; }
  # a setting users need is a parameter: the environment holds the thread
  # count, the kernel directory, the trace and test hooks only (and POSIX's
  # TMPDIR, where hytree bench puts its runs' outputs)
  case $v in
    HYTREE_NUM_THREADS|HYTREE_KERNEL_DIR|HYTREE_TRACE|HYTREE_TEST_*|TMPDIR) ;;
    *) echo "FAIL: src/ reads the environment variable $v (not a test hook, HYTREE_TEST_*)"; fail=1 ;;
  esac
done
for s in NAME SYNOPSIS DESCRIPTION COMMANDS OPTIONS PARAMETERS ENVIRONMENT FILES 'EXIT STATUS' EXAMPLES 'SEE ALSO'; do
  printf '%s\n' "$text" | grep -q "^$s\$" || { echo "FAIL: no section $s"; fail=1; }
done
[ $fail -eq 0 ] && echo "PASS: $page renders cleanly; subcommands and environment variables ($(echo $vars)) documented"
exit $fail
