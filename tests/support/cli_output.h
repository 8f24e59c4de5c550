// Test support: reading what a one-shot tollgate command (run_tollgate, support/server_process.h)
// printed — a description for failure messages, and the one JSON document of a --json answer.
//
// Thread safety: plain functions.
#pragma once

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "support/server_process.h"

namespace tollgate::testing {

// "exit N" (and whether it timed out), then stdout and stderr: for a failed assertion's message.
inline std::string describe(const ProcessResult& r) {
  return "exit " + std::to_string(r.exit_code) + (r.timed_out ? " (timed out)" : "") + "\n--- stdout\n" + r.out +
         "--- stderr\n" + r.err;
}

// The only JSON document that `r` printed (one line); a failure of the calling test otherwise.
inline boost::json::value one_document(const ProcessResult& r) {
  std::istringstream in(r.out);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  EXPECT_EQ(lines.size(), 1u) << r.out;
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(lines.empty() ? std::string() : lines.front(), ec);
  EXPECT_FALSE(ec) << "not JSON: " << r.out;
  return v;
}

}  // namespace tollgate::testing
