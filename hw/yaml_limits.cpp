#include "hw/yaml_limits.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "hw/errors.h"

namespace ptsim::hw {
namespace {

bool token_start(std::string_view s, std::size_t i) {
  if (i == 0) return true;
  const char p = s[i - 1];
  return p == ' ' || p == '\t' || p == '[' || p == '{' || p == ',' || p == ':';
}

// True when the line (comment stripped) ends in a block scalar indicator: `key: |`, `- >-`.
bool opens_block_scalar(std::string_view content) {
  while (!content.empty() && (content.back() == ' ' || content.back() == '\t')) content.remove_suffix(1);
  std::size_t i = content.size();
  while (i > 0 && (content[i - 1] == '+' || content[i - 1] == '-' || (content[i - 1] >= '0' && content[i - 1] <= '9')))
    --i;
  if (i == 0 || (content[i - 1] != '|' && content[i - 1] != '>')) return false;
  return i == 1 || content[i - 2] == ' ' || content[i - 2] == ':';
}

struct Scanner {
  int flow = 0;                  // open '[' / '{'
  char quote = 0;                // inside a quoted scalar ('"' or '\'')
  int block_scalar_indent = -1;  // inside a block scalar: lines indented more than this
  std::vector<int> indents;      // open block levels
  YamlDepth best;

  // Scans line[from..]; returns the comment-stripped content.
  std::string_view scan(std::string_view line, std::size_t from, int base, int line_no) {
    std::size_t end = line.size();
    for (std::size_t i = from; i < line.size(); ++i) {
      const char c = line[i];
      if (quote) {
        if (c == '\\' && quote == '"')
          ++i;
        else if (c == quote)
          quote = 0;
        continue;
      }
      if (c == '#' && (i == 0 || line[i - 1] == ' ' || line[i - 1] == '\t')) {
        end = i;
        break;
      }
      if (!token_start(line, i)) {
        if (flow > 0 && (c == ']' || c == '}')) flow = std::max(0, flow - 1);
        continue;
      }
      if (c == '"' || c == '\'')
        quote = c;
      else if (c == '[' || c == '{')
        ++flow;
      else if (c == ']' || c == '}')
        flow = std::max(0, flow - 1);
      if (base + flow > best.depth) best = {base + flow, line_no};
    }
    return line.substr(0, end);
  }

  void line(std::string_view line, int line_no) {
    std::size_t indent = 0;
    while (indent < line.size() && line[indent] == ' ') ++indent;
    const bool blank = indent == line.size() || line[indent] == '#' || line[indent] == '\r';
    if (block_scalar_indent >= 0) {
      if (blank || static_cast<int>(indent) > block_scalar_indent) return;
      block_scalar_indent = -1;
    }
    if (quote || flow > 0) {  // a continuation line of a quoted scalar or a flow collection
      scan(line, 0, static_cast<int>(indents.size()), line_no);
      return;
    }
    if (blank) return;
    while (!indents.empty() && static_cast<int>(indent) < indents.back()) indents.pop_back();
    if (indents.empty() || static_cast<int>(indent) > indents.back()) indents.push_back(static_cast<int>(indent));
    int depth = static_cast<int>(indents.size());
    std::size_t i = indent;
    // "- - - x" and "? x" open one level each on the same line.
    while (i < line.size() && (line[i] == '-' || line[i] == '?') && (i + 1 == line.size() || line[i + 1] == ' ')) {
      ++depth;
      i += 1;
      while (i < line.size() && line[i] == ' ') ++i;
    }
    if (depth > best.depth) best = {depth, line_no};
    const std::string_view content = scan(line, i, depth, line_no);
    if (flow == 0 && !quote && opens_block_scalar(content)) block_scalar_indent = static_cast<int>(indent);
  }
};

}  // namespace

YamlDepth yaml_depth(std::string_view text) {
  Scanner s;
  int line_no = 0;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t nl = std::min(text.find('\n', pos), text.size());
    s.line(text.substr(pos, nl - pos), ++line_no);
    pos = nl + 1;
  }
  return s.best;
}

void check_yaml_depth(std::string_view text, const std::string& file, const std::string& what, const std::string& key) {
  const YamlDepth d = yaml_depth(text);
  if (d.depth <= kMaxYamlDepth) return;
  throw InputError(file, key,
                   fmt::format("the {} is nested deeper than {} levels (line {})", what, kMaxYamlDepth, d.line),
                   "nest lists and mappings less deeply");
}

}  // namespace ptsim::hw
