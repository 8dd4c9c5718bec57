//go:build !unix

package main

import "os/exec"

// setProcAttr does nothing where there are no process groups.
func setProcAttr(*exec.Cmd) {}

// terminate kills the child: there is no portable polite signal.
func terminate(cmd *exec.Cmd) { kill(cmd) }

// kill kills the child.
func kill(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}
