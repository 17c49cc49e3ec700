// Command buildcontext prints, as a JSON list, the files of a directory that a Docker
// build would send as its context: every file not excluded by the directory's
// .dockerignore, matched with moby/patternmatcher, the matcher Docker and BuildKit
// use. The tests check the Dockerfile's COPY sources against this list, so an
// allow-list .dockerignore that drops a needed file fails without a Docker engine.
//
// Usage: buildcontext DIR
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: buildcontext DIR")
		os.Exit(2)
	}
	files, err := contextFiles(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "buildcontext:", err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(files); err != nil {
		fmt.Fprintln(os.Stderr, "buildcontext:", err)
		os.Exit(1)
	}
}

func ignorePatterns(dir string) ([]string, error) {
	f, err := os.Open(filepath.Join(dir, ".dockerignore"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ignorefile.ReadAll(f)
}

// contextFiles walks every path, so that a `!` exception can re-include a file
// below an excluded directory, as Docker allows.
func contextFiles(dir string) ([]string, error) {
	patterns, err := ignorePatterns(dir)
	if err != nil {
		return nil, err
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		return nil, err
	}
	files := []string{}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		excluded, _, err := pm.MatchesUsingParentResults(rel, patternmatcher.MatchInfo{})
		if err != nil {
			return err
		}
		if !excluded {
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	return files, err
}
