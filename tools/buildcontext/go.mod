module juggler/tools/buildcontext

go 1.24

require github.com/moby/patternmatcher v0.6.1
