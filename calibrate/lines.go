package calibrate

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// What clusters put around nccl-tests' own lines. A launcher tags each
// line with its rank or host, a log collector stamps it with the time, and
// job scripts print dates and banners between the tests. None of it is
// data, but an unknown line is refused rather than skipped: in the middle
// of a table it is more often a broken row, or the sign of a crashed run,
// than decoration.
var (
	// A rank or host tag, as the launchers write them: "0: " (srun
	// --label), "[1,0]<stdout>:" (Open MPI --tag-output), "[0] " (MPICH
	// and Intel MPI -prepend-rank), "[pod/x/y] " (kubectl logs --prefix),
	// "gpu01: " (pdsh, clush).
	openMPITagRE = regexp.MustCompile(`^\[\d+(?:,\d+)*\]<\w+>:`)
	// Open MPI tags each piece of a rank's output it forwards, and
	// nccl-tests writes a row in three (its sizes, then each time's
	// columns, which start with spaces): "[1,0]<stdout>:  8  2  float
	// sum  -1[1,0]<stdout>:    85.70 …[1,0]<stdout>:    74.97 …". Within
	// a line, a tag of stdout before a space marks where a piece began;
	// one glued to a number is no such place, and the row is refused.
	openMPIPieceRE = regexp.MustCompile(`\[\d+(?:,\d+)*\]<stdout>:(\s|$)`)
	bracketTagRE   = regexp.MustCompile(`^\[[^\]\s]*\]:?`)
	hostTagRE      = regexp.MustCompile(`^[\w.-]+:`)
	// A time stamp: an ISO 8601 date with or without a time and zone
	// ("2024-05-01 12:00:00", "2024-05-01T12:00:00.123456789Z", the
	// Kubernetes and Docker style), or a time of day alone, bracketed or
	// not.
	stampRE = regexp.MustCompile(`^\[?(?:\d{4}[-/]\d\d[-/]\d\d(?:[T ]\d\d:\d\d(?::\d\d(?:[.,]\d+)?)?)?|\d\d:\d\d:\d\d(?:[.,]\d+)?)(?:Z|[+-]\d\d:?\d\d| ?UTC)?\]?`)
	// A log collector's level after its stamp ("2024-05-01 10:00:00,123
	// INFO ", Python's logging and most others).
	levelTagRE = regexp.MustCompile(`^(?:INFO|NOTICE|WARN|WARNING|ERROR|DEBUG)\b`)
	// What date(1) prints: "Wed May  1 12:00:00 UTC 2024", "Wed, 01 May
	// 2024 12:00:00 +0000".
	dateLineRE = regexp.MustCompile(`^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*,?\s.*\b\d{1,2}:\d\d\b`)
	// A banner: a rule of one repeated mark ("=====", "-----", "*** all_reduce ***"),
	// or a command echoed by the shell's xtrace ("+ mpirun …").
	bannerRE = regexp.MustCompile(`^(?:={3}|-{3}|\*{3}|~{3}|_{3}|<{3}|>{3}|\.{3}|\|{3}|/{3}|\\{3}|\++(?:\s|$))`)
	// Open MPI's note on the help messages it held back, and how to see
	// them ("8 more processes have sent help message help-mtl-ofi.txt /
	// OFI call fail"): a line that starts with a number but is no row.
	mpiHelpRE = regexp.MustCompile(`^(?:\d+ more process(?:es)? ha(?:s|ve) sent help message |Set MCA parameter "orte_base_help_aggregate")`)
	// What ssh and mpirun print on the job's terminal when a rank's
	// stderr is not tagged: ssh's "Warning: Permanently added '10.0.0.2'
	// (ED25519) to the list of known hosts." as mpirun reaches each node,
	// and mpirun's "[node01:4242] Warning: could not find environment
	// variable "LD_LIBRARY_PATH"" for an -x of a variable not set. Their
	// "Warning:" and "[node01:4242]" read as tags, and go first.
	launcherNoteRE = regexp.MustCompile(`^(?:Permanently added '[^']*' \([\w-]+\) to the list of known hosts\.|could not find environment variable "[^"]*")$`)
	// nccl-tests' own comment lines without their '#', as a page that
	// quotes a run may show them (Markdown reads a leading '#' as a
	// heading, and authors drop it): the version and start lines, the
	// devices, the table's header and what closes it.
	bareCommentRE = regexp.MustCompile(`^(?:nccl-tests version |Collective test (?:starting|concluded):|nThread \d+ nGpus |Using devices$|Rank\s+\d+\s+(?:Group\s+\d+\s+)?Pid\s|out-of-place\s+in-place|size\s+count\s+type\s|\(B\)\s+\(elements\)|Out of bounds values\s*:|Avg bus bandwidth\s*:|Reducing maxBytes )`)
)

// commented is an untagged line with its '#' back where it is one of
// nccl-tests' comment lines quoted without it.
func commented(t string) string {
	if bareCommentRE.MatchString(t) {
		return "# " + t
	}
	return t
}

// untag returns line without its surroundings: leading space, rank and
// host tags and time stamps, as many as it has, in any order; "" for a
// line Open MPI tags as a rank's stderr.
func untag(line string) string {
	t, _ := untagged(line)
	return t
}

// untagged is untag's line, and whether it is "" because Open MPI tags
// it as a rank's stderr.
func untagged(line string) (t string, stderr bool) {
	t = strings.TrimSpace(line)
	start := t
	for {
		n := len(t)
		if m := openMPITagRE.FindString(t); m != "" {
			if strings.HasSuffix(m, "<stderr>:") {
				// nccl-tests prints its table on stdout: what a rank
				// wrote to stderr (warnings, ssh's notes) is not part of it.
				return "", true
			}
			// Open MPI glues the tag to the text: "[1,0]<stdout>:#".
			t = t[len(m):]
		} else if m := stampRE.FindString(t); m != "" && endsTag(t, len(m)) {
			t = t[len(m):]
		} else if m := bracketTagRE.FindString(t); m != "" && endsTag(t, len(m)) {
			t = t[len(m):]
		} else if m := hostTagRE.FindString(t); m != "" && endsTag(t, len(m)) {
			t = t[len(m):]
		} else if m := levelTagRE.FindString(t); m != "" && t != start && endsTag(t, len(m)) {
			t = t[len(m):] // only after a tag or stamp: a line of its own that starts so is kept
		}
		t = strings.TrimLeftFunc(t, unicode.IsSpace)
		if len(t) == n {
			return strings.TrimSpace(openMPIPieceRE.ReplaceAllString(t, " $1")), false
		}
	}
}

// endsTag reports whether a tag of n bytes at the start of t ends there:
// at the end of the line, before a space or before a comment's '#'. "12:"
// in "12:00:00" and "2024-05-01" in "2024-05-01,…" are not tags.
func endsTag(t string, n int) bool {
	if n == len(t) || t[n] == '#' {
		return true
	}
	r, _ := utf8.DecodeRuneInString(t[n:])
	return unicode.IsSpace(r)
}

// decoration reports whether an untagged line is a date, a banner,
// Open MPI's note on held-back help messages or a launcher's note.
func decoration(t string) bool {
	return dateLineRE.MatchString(t) || bannerRE.MatchString(t) || mpiHelpRE.MatchString(t) || launcherNoteRE.MatchString(t)
}
