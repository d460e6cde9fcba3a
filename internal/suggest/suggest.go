// Package suggest finds the known name a mistyped one was probably meant
// to be, for "did you mean" hints in error messages.
package suggest

import "strings"

// Closest returns the option nearest to s by edit distance (case folded,
// a swap of neighbouring letters counted as one edit), if it is near
// enough to be a typo: within 2 edits, and within a third of the longer
// name for short names. Ties go to the earlier option, so the answer does
// not depend on anything but the list's order.
func Closest(s string, options []string) (string, bool) {
	best, bestDist := "", -1
	ls := strings.ToLower(s)
	for _, o := range options {
		if o == s {
			continue
		}
		d := distance(ls, strings.ToLower(o))
		limit := min(2, max(1, max(len(s), len(o))/3))
		if d <= limit && (bestDist < 0 || d < bestDist) {
			best, bestDist = o, d
		}
	}
	return best, bestDist >= 0
}

// DidYouMean is "; did you mean X?" for the option closest to s, or "".
func DidYouMean(s string, options []string) string {
	if o, ok := Closest(s, options); ok {
		return "; did you mean " + o + "?"
	}
	return ""
}

// distance is the optimal string alignment distance between a and b,
// in bytes.
func distance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
