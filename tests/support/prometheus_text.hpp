#pragma once
// A strict reader of the Prometheus text exposition format (0.0.4), for the tests of
// redlimit/prometheus.hpp and of the example service's /metrics: it throws on the first line that a
// scraper would reject or misread, and returns the samples for the tests to count.
//
// Checked: every line is a HELP, a TYPE or a sample; HELP and TYPE at most once per family, before
// its samples; a family's samples contiguous; metric and label names' syntax; label values quoted
// with only \\, \" and \n escapes, and valid UTF-8 (Prometheus's parser refuses the whole scrape for
// one value that is not: no overlong form, surrogate or code point past U+10FFFF); values parse as numbers; no duplicate series; for histograms,
// increasing `le`, cumulative bucket counts, a +Inf bucket equal to _count, and a _sum.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace redlimit_test {

struct Sample {
  std::string name;                          // as written: redlimit_x_bucket
  std::map<std::string, std::string> labels;  // unescaped values
  double value = 0;
};

class PrometheusText {
 public:
  explicit PrometheusText(const std::string& text) {
    std::istringstream in(text);
    std::string line;
    int n = 0;
    while (std::getline(in, line)) {
      ++n;
      try {
        read_line(line);
      } catch (const std::exception& e) {
        throw std::runtime_error("line " + std::to_string(n) + " \"" + line + "\": " + e.what());
      }
    }
    if (!text.empty() && text.back() != '\n') throw std::runtime_error("the exposition must end with a newline");
    for (const auto& [family, type] : types_) {
      if (type == "histogram") check_histogram(family);
    }
  }

  const std::vector<Sample>& samples() const { return samples_; }
  std::string type_of(const std::string& family) const {
    auto it = types_.find(family);
    return it == types_.end() ? "" : it->second;
  }
  // The sum of the values of `name`'s samples whose labels include all of `match`.
  double sum(const std::string& name, const std::map<std::string, std::string>& match = {}) const {
    double total = 0;
    for (const Sample& s : samples_) {
      if (s.name != name) continue;
      bool ok = true;
      for (const auto& [k, v] : match) {
        auto it = s.labels.find(k);
        ok = ok && it != s.labels.end() && it->second == v;
      }
      if (ok) total += s.value;
    }
    return total;
  }

 private:
  static const std::regex& metric_name() {
    static const std::regex r("[a-zA-Z_:][a-zA-Z0-9_:]*");
    return r;
  }

  void read_line(const std::string& line) {
    if (line.empty()) throw std::runtime_error("empty line");
    if (line.rfind("# ", 0) == 0) return read_comment(line);
    if (line[0] == '#') throw std::runtime_error("a comment must be \"# HELP\" or \"# TYPE\" here");
    read_sample(line);
  }

  void read_comment(const std::string& line) {
    std::istringstream in(line.substr(2));
    std::string kind, name, rest;
    in >> kind >> name;
    std::getline(in, rest);
    if (!std::regex_match(name, metric_name())) throw std::runtime_error("bad metric name");
    if (kind == "HELP") {
      if (!help_.insert(name).second) throw std::runtime_error("second HELP for " + name);
    } else if (kind == "TYPE") {
      static const std::set<std::string> types{"counter", "gauge", "histogram", "summary", "untyped"};
      if (!types.count(rest.empty() ? "" : rest.substr(1))) throw std::runtime_error("bad type");
      if (types_.count(name)) throw std::runtime_error("second TYPE for " + name);
      if (seen_.count(name)) throw std::runtime_error("TYPE after samples of " + name);
      types_[name] = rest.substr(1);
    } else {
      throw std::runtime_error("unknown comment kind");
    }
    enter(name);
  }

  // The family a sample belongs to: a histogram's _bucket, _sum and _count are its own.
  std::string family_of(const std::string& name) const {
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string s = suffix;
      if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
        const std::string base = name.substr(0, name.size() - s.size());
        if (type_of(base) == "histogram" || type_of(base) == "summary") return base;
      }
    }
    return name;
  }

  // Families come one after the other: once left, a family may not come back.
  void enter(const std::string& family) {
    if (family == current_) return;
    if (!done_.insert(family).second) throw std::runtime_error(family + " is split in two places");
    current_ = family;
  }

  void read_sample(const std::string& line) {
    Sample s;
    std::size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    s.name = line.substr(0, i);
    if (!std::regex_match(s.name, metric_name())) throw std::runtime_error("bad metric name");
    if (i < line.size() && line[i] == '{') i = read_labels(line, i + 1, s.labels);
    if (i >= line.size() || line[i] != ' ') throw std::runtime_error("no value");
    s.value = number(line.substr(i + 1));
    const std::string family = family_of(s.name);
    if (!types_.count(family)) throw std::runtime_error("sample before its TYPE");
    enter(family);
    seen_.insert(family);
    std::string key = s.name;
    for (const auto& [k, v] : s.labels) key += "\x01" + k + "=" + v;
    if (!series_.insert(key).second) throw std::runtime_error("duplicate series");
    samples_.push_back(std::move(s));
  }

  static std::size_t read_labels(const std::string& line, std::size_t i, std::map<std::string, std::string>& out) {
    static const std::regex label_name("[a-zA-Z_][a-zA-Z0-9_]*");
    while (i < line.size() && line[i] != '}') {
      const std::size_t eq = line.find("=\"", i);
      if (eq == std::string::npos) throw std::runtime_error("bad label");
      const std::string name = line.substr(i, eq - i);
      if (!std::regex_match(name, label_name) || name.rfind("__", 0) == 0) throw std::runtime_error("bad label name");
      std::string value;
      for (i = eq + 2; i < line.size() && line[i] != '"'; ++i) {
        if (line[i] == '\\') {
          const char c = i + 1 < line.size() ? line[++i] : '\0';
          if (c != '\\' && c != '"' && c != 'n') throw std::runtime_error("bad escape");
          value += c == 'n' ? '\n' : c;
        } else {
          value += line[i];
        }
      }
      if (i >= line.size()) throw std::runtime_error("unterminated label value");
      if (!valid_utf8(value)) throw std::runtime_error("label value " + name + " is not valid UTF-8");
      if (!out.emplace(name, value).second) throw std::runtime_error("repeated label");
      ++i;
      if (i < line.size() && line[i] == ',') ++i;
    }
    if (i >= line.size()) throw std::runtime_error("unterminated labels");
    return i + 1;
  }

  // Decodes each code point, then checks it (unlike the sink's table of byte ranges, so that the two
  // do not share a mistake): continuation bytes, the shortest form, no surrogate, at most U+10FFFF.
  static bool valid_utf8(const std::string& s) {
    for (std::size_t i = 0; i < s.size();) {
      const auto lead = static_cast<unsigned char>(s[i]);
      std::size_t n = 1;
      std::uint32_t cp = lead;
      if (lead >= 0xF0 && lead <= 0xF7) {
        n = 4;
        cp = lead & 0x07u;
      } else if (lead >= 0xE0) {
        n = lead <= 0xEF ? 3 : 0;
        cp = lead & 0x0Fu;
      } else if (lead >= 0xC0) {
        n = 2;
        cp = lead & 0x1Fu;
      } else if (lead >= 0x80) {
        n = 0;  // a continuation byte first
      }
      if (n == 0 || i + n > s.size()) return false;
      for (std::size_t k = 1; k < n; ++k) {
        const auto c = static_cast<unsigned char>(s[i + k]);
        if ((c & 0xC0u) != 0x80u) return false;
        cp = (cp << 6) | (c & 0x3Fu);
      }
      static constexpr std::uint32_t kLeast[] = {0, 0, 0x80, 0x800, 0x10000};
      if (cp < kLeast[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
      i += n;
    }
    return true;
  }

  static double number(const std::string& text) {
    if (text == "+Inf") return INFINITY;
    if (text == "-Inf") return -INFINITY;
    if (text == "NaN") return NAN;
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0') throw std::runtime_error("bad value \"" + text + "\"");
    return v;
  }

  // Per series (the labels but le): le increasing, counts cumulative, +Inf last and equal to _count.
  void check_histogram(const std::string& family) const {
    std::map<std::map<std::string, std::string>, std::vector<std::pair<double, double>>> buckets;
    std::map<std::map<std::string, std::string>, double> counts, sums;
    for (const Sample& s : samples_) {
      auto labels = s.labels;
      if (s.name == family + "_bucket") {
        if (!labels.count("le")) throw std::runtime_error(family + ": a bucket without le");
        const double le = number(labels["le"]);
        labels.erase("le");
        buckets[labels].emplace_back(le, s.value);
      } else if (s.name == family + "_count") {
        counts[labels] = s.value;
      } else if (s.name == family + "_sum") {
        sums[labels] = s.value;
      }
    }
    for (const auto& [labels, series] : buckets) {
      for (std::size_t i = 1; i < series.size(); ++i) {
        if (!(series[i].first > series[i - 1].first)) throw std::runtime_error(family + ": le not increasing");
        if (series[i].second < series[i - 1].second) throw std::runtime_error(family + ": buckets not cumulative");
      }
      if (series.empty() || !std::isinf(series.back().first)) throw std::runtime_error(family + ": no +Inf bucket");
      if (!counts.count(labels) || counts.at(labels) != series.back().second) {
        throw std::runtime_error(family + ": _count is not the +Inf bucket");
      }
      if (!sums.count(labels)) throw std::runtime_error(family + ": no _sum");
    }
  }

  std::vector<Sample> samples_;
  std::map<std::string, std::string> types_;
  std::set<std::string> help_, seen_, done_, series_;
  std::string current_;
};

}  // namespace redlimit_test
