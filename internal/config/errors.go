package config

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// EnvironmentFile is the [Error.File] of problems found in environment variables,
// which have no line to point at; Field is then the variable's name.
const EnvironmentFile = "environment"

// Error is one problem in a configuration. Messages never contain secret values.
type Error struct {
	File   string // file name, EnvironmentFile, or "" for a definition not read from a file
	Line   int    // 1-based; 0 when there is no position
	Column int    // 1-based; 0 when there is no position
	Field  string // dotted path, e.g. "servers.github.url" or "settings.listen"
	Msg    string
}

// Error formats the problem as "FILE:LINE:COLUMN: FIELD: MSG", the form editors
// and CI annotations recognize; parts that are unknown are left out.
func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d:%d", e.Line, e.Column)
		}
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found, so an operator fixes a file in one pass rather
// than one error per restart. Error joins them with newlines.
type Errors []*Error

// Error joins the problems with newlines.
func (e Errors) Error() string {
	if len(e) == 0 {
		return "no configuration errors"
	}
	lines := make([]string, len(e))
	for i, err := range e {
		lines[i] = err.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap exposes each problem to errors.Is and errors.As.
func (e Errors) Unwrap() []error {
	errs := make([]error, len(e))
	for i, err := range e {
		errs[i] = err
	}
	return errs
}

// As lets errors.As fill either an Errors or a *Errors target, whichever the
// caller declared.
func (e Errors) As(target any) bool {
	switch t := target.(type) {
	case *Errors:
		*t = e
		return true
	case **Errors:
		c := e
		*t = &c
		return true
	}
	return false
}

// sortErrors orders problems as they appear in the file, then those from the
// environment, then those without a file, so output reads top to bottom.
func sortErrors(errs Errors) {
	rank := func(e *Error) int {
		switch {
		case e.File == EnvironmentFile:
			return 1
		case e.File == "":
			return 2
		}
		return 0
	}
	slices.SortStableFunc(errs, func(a, b *Error) int {
		return cmp.Or(
			cmp.Compare(rank(a), rank(b)),
			cmp.Compare(a.Line, b.Line),
			cmp.Compare(a.Column, b.Column),
		)
	})
}

// asError returns errs as the error Load and Parse document (*Errors), or nil.
func asError(errs Errors) error {
	if len(errs) == 0 {
		return nil
	}
	sortErrors(errs)
	return &errs
}
