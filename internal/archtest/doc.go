// Package archtest holds no code: its tests enforce the import rules of
// DEVELOPERS.md on the packages of the module (go list and the type
// checker): each floor imports only the floors below it, the shipped
// programs link no lab package and none of the modules only the lab
// needs, and no product package exports what only the lab uses; and, read
// from the source, the engine's jobs (jobs_test.go) and the command
// line's own choice of backend (cli_test.go).
package archtest
