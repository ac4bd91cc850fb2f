// The guard's view of a source file, internal to jitd_guard: code as tokens
// with their lines (comments and preprocessor lines blanked), the #defines
// that could move code into or out of a namespace behind the scan's back,
// and the extent of one construct. Not a C++ parser: see source_scan.cpp.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace jitd::guard::detail {

struct Token {
  // A string or character literal is one token, spelled as in the source
  // (`extern "C"` must read as what it is); everything else is an
  // identifier or number, "::", or a single character.
  std::string text;
  int line;
};

// The tokens of `source`, with comments and preprocessor lines left out,
// delimited as the compiler delimits them: a backslash at a line's end
// continues a // comment or a directive, a raw string literal (R"x(...)x")
// is one literal whatever it holds, a ' between digits separates them, and
// a digraph is the token it stands for (<% %> <: :> %: are { } [ ] #).
// Preprocessor conditions are not evaluated: every branch is read (the
// module check, namespace_guard.h, sees what was compiled).
std::vector<Token> Tokenize(std::string_view source);

// A #define whose replacement opens or closes a brace, or says `namespace`:
// once expanded, code after a use can sit in another namespace than the
// text says, and the scan (which skips directives) cannot tell which.
struct BraceMacro {
  std::string name;
  std::string definition;  // "#define BEGIN_NS namespace sglang {", spaces collapsed
  std::string file;
  int line = 0;
  int delta = 0;  // '{' minus '}' in the replacement
  bool names_namespace = false;
};
using BraceMacros = std::map<std::string, BraceMacro>;

// The brace macros `source` defines (the first definition of each name).
std::vector<BraceMacro> FindBraceMacros(std::string_view file, std::string_view source);

// Braces a token opens (+) or closes (-), a brace macro's use included.
int BraceDelta(const Token& token, const BraceMacros& macros);

// One construct starting at token `begin`: it ends at its ';', or at the
// '}' that closes its first '{' (and a ';' right after). `open` and `close`
// are those braces' indices (npos when it has none), so the body is
// (open, close).
struct Extent {
  size_t begin = 0;
  size_t open = std::string::npos;
  size_t close = std::string::npos;
  size_t end = 0;
};
Extent ConstructAt(const std::vector<Token>& t, size_t begin, size_t limit, const BraceMacros& macros);

// The first tokens of [from, to), up to its first '{', as one would write
// them: "template<typename T> struct Params".
std::string Snippet(const std::vector<Token>& t, size_t from, size_t to);

// The index after the '>' that closes the '<' at `i` (npos if none before
// `limit`).
size_t AfterAngles(const std::vector<Token>& t, size_t i, size_t limit);

}  // namespace jitd::guard::detail
