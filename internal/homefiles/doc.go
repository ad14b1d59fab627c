// Package homefiles reads and writes the files through which a home's owner
// is found and reached, all under HOME/run: the API socket (api.SocketPath),
// the owner record (api.OwnerPath), the home's own bearer token
// (api.TokenPath) and the named tokens (HOME/run/tokens).
//
// It decides nothing. Who owns a home, and how that is decided (open the
// store and become the owner, or be a client of the one there is), is
// cmd/lhengine/internal/home, which uses these files; the server's token
// middleware asks Match which token a request carries. It is a leaf: it
// imports ../../api only, so the server and the commands both sit above it.
package homefiles
