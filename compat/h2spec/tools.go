//go:build tools

// Package tools pins h2spec, the HTTP/2 conformance tester, for compat/h2spec/run.mjs.
package tools

import _ "github.com/summerwind/h2spec/cmd/h2spec"
