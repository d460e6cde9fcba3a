package yamlerr

import (
	"errors"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestFixCountsParserLinesFromOne parses documents with a mistake on a
// known line and checks the message names it.
func TestFixCountsParserLinesFromOne(t *testing.T) {
	for doc, want := range map[string]string{
		"a: 1\nb: {c: 1\n":             "yaml: line 2: did not find expected ',' or '}'",
		"{a: 1\n":                      "yaml: line 1: did not find expected ',' or '}'",
		"a:\n  - 1\n  - [2, 3\nb: 4\n": "yaml: line 3: did not find expected ',' or ']'",
		"a: 1\n\tb: 2\n":               "yaml: line 2: found a tab character that violates indentation", // a scanner error: as it was
	} {
		var v any
		err := yaml.Unmarshal([]byte(doc), &v)
		if err == nil {
			t.Fatalf("%q parsed", doc)
		}
		got := Fix(err, []byte(doc))
		if got.Error() != want {
			t.Errorf("%q: %q (the library said %q), want %q", doc, got, err, want)
		}
		if !errors.Is(got, err) {
			t.Errorf("%q: the fixed error does not wrap the library's", doc)
		}
	}
	if Fix(nil, nil) != nil {
		t.Error("Fix(nil, nil) != nil")
	}
}
