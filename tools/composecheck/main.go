// Command composecheck loads a Compose project the way `docker compose` does (with
// compose-go, the library Docker Compose itself is built on) and prints the resolved,
// normalized model as JSON. The tests in tests/deploy assert on that JSON, so a file
// that Compose would reject, or would read differently than intended, fails there,
// on a machine without a Docker engine.
//
// Usage: composecheck [-project-directory DIR] [-profile NAME]... [FILE...]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/compose-spec/compose-go/v2/cli"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	dir := flag.String("project-directory", "", "working directory (default: the first file's directory)")
	var profiles listFlag
	flag.Var(&profiles, "profile", "profile to enable (repeatable; \"*\" enables all)")
	flag.Parse()

	if err := run(*dir, profiles, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "composecheck:", err)
		os.Exit(1)
	}
}

// run mirrors the option chain of `docker compose config`: OS environment, the
// project's .env, COMPOSE_PROFILES unless -profile is given, then a full load
// (interpolation, normalization, consistency checks, resolved paths).
func run(dir string, profiles []string, files []string) error {
	opts, err := cli.NewProjectOptions(files,
		cli.WithWorkingDirectory(dir),
		cli.WithOsEnv,
		cli.WithConfigFileEnv,
		cli.WithDefaultConfigPath,
		cli.WithEnvFiles(),
		cli.WithDotEnv,
		cli.WithDefaultProfiles(profiles...),
	)
	if err != nil {
		return err
	}
	project, err := opts.LoadProject(context.Background())
	if err != nil {
		return err
	}
	out, err := project.MarshalJSON()
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(append(out, '\n'))
	return err
}
