// Package yamlerr corrects the line numbers of the yaml library's syntax
// errors, for the topology and model loaders.
//
// go.yaml.in/yaml/v3 counts lines from 1 for its scanner's errors but
// from 0 for its parser's (parser.fail adds one for scanner errors only),
// so "did not find expected ',' or '}'" names the line before the one
// that holds the mistake, and a parser error on the first line names no
// line at all. A mistake found at the end of a document that lacks its
// last newline is placed past the last line; Fix names the last line.
package yamlerr

import (
	"regexp"
	"strconv"
	"strings"
)

// parserProblems are the problems only the yaml parser reports (its
// scanner's are counted from 1 already).
var parserProblems = []string{
	"did not find expected ',' or ']'",
	"did not find expected ',' or '}'",
	"did not find expected <document start>",
	"did not find expected key",
	"did not find expected node content",
	"did not find expected '-' indicator",
	"found duplicate %YAML directive",
	"found duplicate %TAG directive",
	"found incompatible YAML document",
	"found undefined tag handle",
}

var withLine = regexp.MustCompile(`^yaml: line ([0-9]+): (.*)$`)

// Fix returns err, an error of the yaml library reading doc, with the line
// of a parser error counted from 1, as the scanner's are; other errors,
// and nil, are returned as they are.
func Fix(err error, doc []byte) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	line, problem := 0, strings.TrimPrefix(msg, "yaml: ")
	if m := withLine.FindStringSubmatch(msg); m != nil {
		n, convErr := strconv.Atoi(m[1])
		if convErr != nil {
			return err
		}
		line, problem = n, m[2]
	} else if !strings.HasPrefix(msg, "yaml: ") {
		return err
	}
	for _, p := range parserProblems {
		if problem == p {
			lines := strings.Count(string(doc), "\n")
			if len(doc) > 0 && doc[len(doc)-1] != '\n' {
				lines++
			}
			return &fixed{msg: "yaml: line " + strconv.Itoa(max(1, min(line+1, lines))) + ": " + problem, err: err}
		}
	}
	return err
}

type fixed struct {
	msg string
	err error
}

func (f *fixed) Error() string { return f.msg }
func (f *fixed) Unwrap() error { return f.err }
