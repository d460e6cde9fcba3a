package suggest

import "testing"

func TestClosest(t *testing.T) {
	ops := []string{"allreduce", "reducescatter", "allgather", "gather", "broadcast", "reduce"}
	for _, tc := range []struct {
		s, want string
		ok      bool
	}{
		{"allredcue", "allreduce", true}, // a swap
		{"alreduce", "allreduce", true},  // a letter missing
		{"AllReduce", "allreduce", true}, // case
		{"gahter", "gather", true},
		{"scatter", "", false}, // too far from reducescatter
		{"xyz", "", false},
		{"allreduce", "", false}, // itself is no suggestion
	} {
		got, ok := Closest(tc.s, ops)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Closest(%q) = %q, %v; want %q, %v", tc.s, got, ok, tc.want, tc.ok)
		}
	}
	if got := DidYouMean("rign", []string{"ring", "rd", "rhd"}); got != "; did you mean ring?" {
		t.Errorf("DidYouMean(rign) = %q", got)
	}
	if got := DidYouMean("zzzz", []string{"ring"}); got != "" {
		t.Errorf("DidYouMean(zzzz) = %q", got)
	}
}

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"a", "", 1}, {"ring", "rign", 1}, {"kitten", "sitting", 3}, {"ab", "ba", 1}} {
		if got := distance(tc.a, tc.b); got != tc.d {
			t.Errorf("distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.d)
		}
	}
}
