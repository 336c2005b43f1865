"""What runs on each node of a distribution (one srun task per node): plain bash and coreutils, so a node needs
neither trainready nor Python.  Under a lock per node and file (flock(1) on DEST/.NAME.lock: two distributions of
the same file take turns; a lock that is a symbolic link is refused), it removes the part files an interrupted run
left, skips a node whose DEST/NAME already has the record's sha256, else copies SRC to DEST/.NAME.part.RANDOM
(mktemp(1): a name no one can plant a symbolic link at beforehand; cp(1) --remove-destination then creates it anew,
O_EXCL, never through a link), syncs it, checks the node's own sha256 of the copy against the record and only
then renames it to DEST/NAME, readable as the umask allows.  Every name comes through the environment, never
through the script's text.  It prints one line:

    TRAINREADY-IMAGE <TAB> node <TAB> copied|already|failed <TAB> bytes <TAB> seconds <TAB> words

`words`: the copy's own words on a failure (cp, mkdir, flock: 'No space left on device', 'Permission denied'),
or what the copy replaced.  DEST may hold %n, the node's name (SLURMD_NODENAME): a node-local folder per node
where several nodes share one host or one file system."""

from __future__ import annotations

TAG = "TRAINREADY-IMAGE"

SCRIPT = r"""
set -u
node=${SLURMD_NODENAME:-$(hostname -s)}
dest=${TR_DEST//%n/$node}
final=$dest/$TR_NAME
out() { printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$TR_TAG" "$node" "$1" "$2" "$3" "$(echo "$4" | tr '\t\n' '  ')"; exit 0; }
now() { date +%s.%N; }
err=$(mkdir -p -- "$dest" 2>&1) || out failed 0 0 "$err"
[ -L "$dest/.$TR_NAME.lock" ] && out failed 0 0 "$dest/.$TR_NAME.lock is a symbolic link: refused"
err=$( { : >>"$dest/.$TR_NAME.lock"; } 2>&1) || out failed 0 0 "${err#*: }"
exec 9>>"$dest/.$TR_NAME.lock"
flock -w "$TR_LOCK_WAIT" 9 || out failed 0 0 "another distribution of $TR_NAME held $dest/.$TR_NAME.lock for ${TR_LOCK_WAIT} s"
rm -f -- "$dest/.$TR_NAME.part."*
note=
if [ -e "$final" ]; then
    have=$(sha256sum <"$final" 2>&1 | cut -d' ' -f1)
    if [ "$have" = "$TR_SHA" ]; then [ -n "${TR_MOVE-}" ] && rm -f -- "$TR_SRC"; out already 0 0 ""; fi
    note="replaced a copy with sha256:$have"
fi
part=$(mktemp -p "$dest" ".$TR_NAME.part.XXXXXXXXXX" 2>&1) || out failed 0 0 "$part"
t0=$(now)
if [ -n "${TR_MOVE-}" ]; then err=$(mv -f -- "$TR_SRC" "$part" 2>&1)
else err=$(cp --remove-destination -- "$TR_SRC" "$part" 2>&1); fi || { rm -f -- "$part"; out failed 0 0 "$err"; }
chmod "$(printf '%o' $(( 0666 & ~0$(umask) )))" "$part"
err=$(sync -- "$part" 2>&1) || { rm -f -- "$part"; out failed 0 0 "$err"; }
got=$(sha256sum <"$part" | cut -d' ' -f1)
[ "$got" = "$TR_SHA" ] || { rm -f -- "$part"; out failed 0 0 "the copy here has sha256:$got, the record sha256:$TR_SHA"; }
err=$(mv -f -- "$part" "$final" 2>&1) || { rm -f -- "$part"; out failed 0 0 "$err"; }
sync -- "$dest" 2>/dev/null
out copied "$(stat -c %s "$final")" "$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }')" "$note"
"""
