// Package archtest holds no code: its test enforces the import rules of
// DEVELOPERS.md on the packages of the module (go list), so that the
// daemon never links the measurement lab and each floor imports only the
// floors below it.
package archtest
