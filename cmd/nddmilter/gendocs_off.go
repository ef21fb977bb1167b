//go:build !gendocs

package main

import "github.com/spf13/cobra"

// genDocsCmds: the shipped binary has no gendocs command (see gendocs.go).
func genDocsCmds() []*cobra.Command { return nil }
