// Package testkit is berth's one way for a test to wait and one way to
// compare with a golden file, as Go's own cmd/go script tests keep one of
// each; and the one way to write a file a test then executes
// (WriteExecutable).
//
// It is for tests only: nothing but _test.go files may import it. It links
// the testing package and registers the -update flag, neither of which
// belongs in a program; an import rule (cmd/berth's TestImportRules) keeps
// it out of the berth binary. It imports only the standard library, so the
// tests of every package, accounting and probes included, can use it
// without a cycle.
package testkit
