package topology

import (
	"bytes"
	"errors"
	"io"

	"go.yaml.in/yaml/v3"
)

// readYAMLLines reads a document laid out as WriteYAML lays it out: a few
// top-level scalars, then "nodes:" and "links:" each followed by one flow
// mapping per line of plain keys and values. It holds the nodes and links
// and nothing per element beside them, where the yaml library's node tree
// takes about 2 KB per element: 8 GB for a file at MaxLinks.
//
// ok is false when the document is not of that shape, holds anything this
// reader does not decide exactly as the yaml library does (quotes, anchors,
// comments, a null, a repeated or unknown key), or is wrong in any way: the
// caller then reads it with the library, which gives the result or the
// error (a syntax error further on comes before a bad value, so only the
// whole document tells which message is right). When ok is true, t is what
// the library's reading gives.
func readYAMLLines(data []byte) (t *Topology, ok bool) {
	type section int
	const (
		header section = iota
		nodesSection
		linksSection
		done
	)
	at := header
	var head []byte // the top-level scalars, read by the library
	var name string
	var vendor CPUVendor
	var nodes []Node
	links := []Link{} // as the library reader: empty, not nil, when there are none
	var index map[string]int
	var f [4]field
	lineNo := 0
	for rest := data; len(rest) > 0; {
		lineNo++
		end := bytes.IndexByte(rest, '\n')
		if end < 0 {
			return nil, false // WriteYAML ends every line
		}
		ln := rest[:end]
		rest = rest[end+1:]
		switch {
		case at == header && string(ln) == "nodes:":
			if name, vendor, ok = readHeader(head); !ok {
				return nil, false
			}
			at = nodesSection
		case at == header:
			if len(ln) == 0 || ln[0] == ' ' || ln[0] == '-' || ln[0] == '#' || bytes.IndexByte(ln, '\r') >= 0 {
				return nil, false
			}
			head = append(head, ln...)
			head = append(head, '\n')
		case at == nodesSection && (string(ln) == "links:" || string(ln) == "links: []"):
			if len(nodes) == 0 {
				return nil, false
			}
			if checkUniqueNames(nodes) != nil {
				return nil, false
			}
			index = nodeIndex(nodes)
			at = linksSection
			if string(ln) == "links: []" {
				at = done
			}
		case at == nodesSection:
			if len(nodes) == MaxNodes || !flowFields(ln, nodeKeys, &f, lineNo) {
				return nil, false
			}
			n, err := nodeFromFields(len(nodes), &f, lineNo)
			if err != nil {
				return nil, false
			}
			nodes = append(nodes, n)
		case at == linksSection:
			if len(links) == MaxLinks || !flowFields(ln, linkKeys, &f, lineNo) {
				return nil, false
			}
			l, err := linkFromFields(len(links), &f, lineNo, index)
			if err != nil {
				return nil, false
			}
			links = append(links, l)
		default:
			return nil, false
		}
	}
	if at != linksSection && at != done {
		return nil, false
	}
	t, err := New(name, nodes, links)
	if err != nil {
		return nil, false
	}
	t.HostCPU = vendor
	return t, true
}

// readHeader reads the top-level name and cpu with the yaml library; ok is
// false for anything else there, or anything wrong.
func readHeader(head []byte) (name string, vendor CPUVendor, ok bool) {
	if len(head) == 0 {
		return "", UnknownCPU, true
	}
	dec := yaml.NewDecoder(bytes.NewReader(head))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		return "", 0, false
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return "", 0, false
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return "", 0, false
	}
	root := doc.Content[0]
	seen := map[string]bool{}
	for k := 0; k+1 < len(root.Content); k += 2 {
		kn, vn := root.Content[k], root.Content[k+1]
		if kn.Kind != yaml.ScalarNode || vn.Kind != yaml.ScalarNode || seen[kn.Value] || vn.Anchor != "" {
			return "", 0, false
		}
		seen[kn.Value] = true
		switch {
		case kn.Value != "name" && kn.Value != "cpu":
			return "", 0, false // the tree reader names what it is
		case vn.ShortTag() == "!!null":
		case kn.Value == "name":
			name = vn.Value
		case kn.Value == "cpu":
			v, err := ParseCPUVendor(vn.Value)
			if err != nil {
				return "", 0, false
			}
			vendor = v
		default:
			return "", 0, false
		}
	}
	return name, vendor, true
}

// flowFields reads a line "  - {key: value, …}" into f, in the order of
// keys, with every value on line lineNo. It reports false unless every key
// is one of keys, given once, and every value is a plain scalar whose text
// is its value: letters, digits and "_./+-", and not a null.
func flowFields(ln []byte, keys []string, f *[4]field, lineNo int) bool {
	*f = [4]field{}
	if !bytes.HasPrefix(ln, []byte("  - {")) || !bytes.HasSuffix(ln, []byte("}")) {
		return false
	}
	body := ln[len("  - {") : len(ln)-1]
	for len(body) > 0 {
		var pair []byte
		if i := bytes.Index(body, []byte(", ")); i >= 0 {
			pair, body = body[:i], body[i+2:]
			if len(body) == 0 {
				return false
			}
		} else {
			pair, body = body, nil
		}
		colon := bytes.Index(pair, []byte(": "))
		if colon < 0 {
			return false
		}
		key, val := pair[:colon], pair[colon+2:]
		idx := -1
		for i, k := range keys {
			if string(key) == k {
				idx = i
			}
		}
		if idx < 0 || f[idx].line != 0 || !plainText(val) {
			return false
		}
		f[idx] = field{val: string(val), set: true, line: lineNo}
	}
	return true
}

// plainText reports whether the yaml library reads s, as a value in a flow
// mapping, as a string of exactly these bytes.
func plainText(s []byte) bool {
	if len(s) == 0 {
		return false
	}
	switch string(s) {
	case "null", "Null", "NULL":
		return false
	}
	for i, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '.', c == '/', c == '+':
		case c == '-' && i > 0:
		default:
			return false
		}
	}
	return true
}
