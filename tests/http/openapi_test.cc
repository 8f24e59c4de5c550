// docs/openapi.json against the routes the server implements (http::Api::route_templates()) and
// against what the running server serves at GET /openapi.json.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <regex>
#include <set>

#include "http/api.h"
#include "http/http_test_support.h"

namespace tollgate::httptest {
namespace {

const std::string kDocPath = std::string(TOLLGATE_SOURCE_DIR) + "/docs/openapi.json";

json::value load_document() {
  const std::string text = read_file(kDocPath);
  boost::system::error_code ec;
  json::value doc = json::parse(text, ec);
  EXPECT_FALSE(ec) << kDocPath << " is not JSON: " << ec.message();
  return doc;
}

const std::set<std::string> kMethods{"get", "put", "post", "delete", "options", "head", "patch", "trace"};

// "GET /v1/holds/{hold_id}" for every operation of the document.
std::set<std::string> documented_operations(const json::value& doc) {
  std::set<std::string> out;
  if (!doc.is_object() || !doc.as_object().contains("paths")) return out;
  for (const auto& [path, item] : doc.at("paths").as_object()) {
    for (const auto& [method, operation] : item.as_object()) {
      if (!kMethods.count(std::string(method))) continue;
      std::string upper(method);
      for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      out.insert(upper + " " + std::string(path));
    }
  }
  return out;
}

TEST(OpenApi, EveryImplementedRouteIsDocumentedAndEveryDocumentedOperationIsImplemented) {
  const json::value doc = load_document();
  const std::set<std::string> documented = documented_operations(doc);
  const auto& templates = http::Api::route_templates();
  const std::set<std::string> implemented(templates.begin(), templates.end());
  ASSERT_EQ(implemented.size(), templates.size()) << "a route is listed twice";
  ASSERT_FALSE(implemented.empty());
  for (const std::string& route : implemented) {
    EXPECT_TRUE(documented.count(route)) << route << " is served but not in docs/openapi.json";
  }
  for (const std::string& operation : documented) {
    EXPECT_TRUE(implemented.count(operation)) << operation << " is in docs/openapi.json but not served";
  }
}

TEST(OpenApi, EveryPathParameterIsDeclaredAndEveryOperationHasResponses) {
  const json::value doc = load_document();
  ASSERT_TRUE(doc.is_object());
  EXPECT_EQ(std::string(doc.at("openapi").as_string()).rfind("3.", 0), 0u) << "not an OpenAPI 3 document";
  const std::regex param(R"(\{([a-z_]+)\})");
  for (const auto& [path, item] : doc.at("paths").as_object()) {
    const std::string p(path);
    std::set<std::string> in_path;
    for (std::sregex_iterator it(p.begin(), p.end(), param), end; it != end; ++it) in_path.insert((*it)[1]);
    for (const auto& [method, operation] : item.as_object()) {
      if (!kMethods.count(std::string(method))) continue;
      const json::object& op = operation.as_object();
      const std::string where = std::string(method) + " " + p;
      EXPECT_TRUE(op.contains("responses") && !op.at("responses").as_object().empty()) << where << " has no responses";
      std::set<std::string> declared;
      auto collect = [&](const json::object& holder) {
        if (auto* params = holder.if_contains("parameters")) {
          for (const auto& v : params->as_array()) {
            const json::object& o = v.as_object();
            if (o.contains("in") && o.at("in") == "path") declared.insert(std::string(o.at("name").as_string()));
          }
        }
      };
      collect(item.as_object());
      collect(op);
      EXPECT_EQ(declared, in_path) << where << ": path parameters declared otherwise than the path names them";
    }
  }
}

TEST(OpenApi, EveryReferenceResolves) {
  const json::value doc = load_document();
  std::vector<std::string> unresolved;
  std::function<void(const json::value&)> walk = [&](const json::value& v) {
    if (v.is_array()) {
      for (const auto& e : v.as_array()) walk(e);
    } else if (v.is_object()) {
      for (const auto& [k, e] : v.as_object()) {
        if (k == "$ref" && e.is_string()) {
          const std::string ref(e.as_string());
          if (ref.rfind("#/", 0) != 0) {
            unresolved.push_back(ref);
            continue;
          }
          boost::system::error_code ec;
          const json::value* target = doc.find_pointer(ref.substr(1), ec);
          if (!target) unresolved.push_back(ref);
        } else {
          walk(e);
        }
      }
    }
  };
  walk(doc);
  EXPECT_TRUE(unresolved.empty()) << "unresolved $ref: " << (unresolved.empty() ? "" : unresolved.front());
}

// What client generators need (issue 14): servers, a stable camelCase operationId on every
// operation, declared tags, and the shared schemas referenced rather than repeated.
TEST(OpenApi, GeneratorsGetServersOperationIdsTagsAndSharedSchemas) {
  const json::value doc = load_document();
  ASSERT_TRUE(doc.is_object());
  // OpenAPI 3.0.x: the version Debian 12's validator (scripts/lint-openapi) checks.
  EXPECT_EQ(std::string(doc.at("openapi").as_string()).rfind("3.0.", 0), 0u);
  const json::array* servers = doc.as_object().if_contains("servers") ? &doc.at("servers").as_array() : nullptr;
  ASSERT_TRUE(servers && !servers->empty()) << "no servers";
  EXPECT_EQ(servers->at(0).at("url"), "http://{host}:{port}");
  EXPECT_EQ(servers->at(0).at("variables").at("port").at("default"), "8080");
  std::set<std::string> tags;
  for (const auto& t : doc.at("tags").as_array()) tags.insert(std::string(t.at("name").as_string()));

  const std::regex camel("[a-z][a-zA-Z0-9]*");
  std::map<std::string, std::string> ids;  // operationId → "POST /v1/holds"
  for (const auto& [path, item] : doc.at("paths").as_object()) {
    for (const auto& [method, operation] : item.as_object()) {
      if (!kMethods.count(std::string(method))) continue;
      const std::string where = std::string(method) + " " + std::string(path);
      const json::object& op = operation.as_object();
      ASSERT_TRUE(op.contains("operationId")) << where << " has no operationId";
      const std::string id(op.at("operationId").as_string());
      EXPECT_TRUE(std::regex_match(id, camel)) << where << ": " << id << " is not camelCase";
      EXPECT_TRUE(ids.emplace(id, where).second) << id << " names " << ids[id] << " and " << where;
      ASSERT_TRUE(op.contains("tags")) << where;
      for (const auto& t : op.at("tags").as_array()) {
        EXPECT_TRUE(tags.count(std::string(t.as_string()))) << where << ": tag " << t << " is not declared";
      }
    }
  }
  // Stable names that clients (and their users) rely on: a rename is a breaking change.
  EXPECT_EQ(ids["reserveHold"], "post /v1/holds");
  EXPECT_EQ(ids["commitHold"], "post /v1/holds/{hold_id}/commit");
  EXPECT_EQ(ids["releaseHold"], "post /v1/holds/{hold_id}/release");
  EXPECT_EQ(ids["createAccount"], "post /v1/accounts");
  EXPECT_EQ(ids["creditAccount"], "post /v1/accounts/{account_id}/credits");
  EXPECT_EQ(ids["getJob"], "get /v1/jobs/{client_request_id}");

  // Account, Hold, Event, Job and Problem are component schemas, and no answer repeats one inline:
  // an inline object with most of a shared schema's properties would be a copy.
  const json::object& schemas = doc.at("components").at("schemas").as_object();
  std::map<std::string, std::set<std::string>> shared;
  for (const char* name : {"Account", "Hold", "Event", "Job", "Problem"}) {
    ASSERT_TRUE(schemas.contains(name)) << name;
    for (const auto& [k, v] : schemas.at(name).at("properties").as_object()) shared[name].insert(std::string(k));
  }
  std::map<std::string, int> references;
  std::function<void(const json::value&, const std::string&)> walk = [&](const json::value& v, const std::string& at) {
    if (v.is_array()) {
      for (const auto& e : v.as_array()) walk(e, at);
      return;
    }
    if (!v.is_object()) return;
    const json::object& o = v.as_object();
    if (const auto* ref = o.if_contains("$ref"); ref && ref->is_string()) {
      const std::string r(ref->as_string());
      const std::string prefix = "#/components/schemas/";
      if (r.rfind(prefix, 0) == 0) ++references[r.substr(prefix.size())];
    }
    if (const auto* props = o.if_contains("properties"); props && props->is_object()) {
      for (const auto& [name, keys] : shared) {
        if (at == "/components/schemas/" + name) continue;
        std::size_t common = 0;
        for (const auto& [k, p] : props->as_object()) common += keys.count(std::string(k));
        EXPECT_FALSE(common * 2 > keys.size() && common >= 3) << at << " repeats " << name << " inline: use its $ref";
      }
    }
    for (const auto& [k, e] : o) walk(e, at + "/" + std::string(k));
  };
  walk(doc.at("paths"), "/paths");
  walk(doc.at("components"), "/components");
  for (const char* name : {"Account", "Hold", "Event", "Job", "Problem"}) {
    EXPECT_GT(references[name], 0) << name << " is never referenced";
  }
}

// Every operation that takes a key can be refused by the failed-authentication throttle (README:
// Security at the edge): a generated client must know the 429 and its Retry-After.
TEST(OpenApi, EveryOperationThatTakesAKeyDocumentsTheFailedAuthThrottle) {
  const json::value doc = load_document();
  ASSERT_TRUE(doc.is_object());
  const json::object& throttled = doc.at("components").at("responses").at("TooManyFailedAuth").as_object();
  EXPECT_NE(std::string(throttled.at("description").as_string()).find("too_many_failed_auth"), std::string::npos);
  EXPECT_TRUE(throttled.at("headers").as_object().contains("Retry-After"));
  int keyed = 0;
  for (const auto& [path, item] : doc.at("paths").as_object()) {
    for (const auto& [method, operation] : item.as_object()) {
      if (!kMethods.count(std::string(method))) continue;
      const json::object& op = operation.as_object();
      const json::value* security = op.if_contains("security");
      if (security && security->as_array().empty()) continue;  // open: no key, nothing to throttle
      ++keyed;
      const std::string where = std::string(method) + " " + std::string(path);
      const json::object& responses = op.at("responses").as_object();
      ASSERT_TRUE(responses.contains("429")) << where << " does not document 429 too_many_failed_auth";
      const json::object& r = responses.at("429").as_object();
      const std::string ref = r.contains("$ref") ? std::string(r.at("$ref").as_string()) : "";
      const std::string description = r.contains("description") ? std::string(r.at("description").as_string()) : "";
      EXPECT_TRUE(ref == "#/components/responses/TooManyFailedAuth" ||
                  description.find("too_many_failed_auth") != std::string::npos)
          << where << ": its 429 does not name too_many_failed_auth";
    }
  }
  EXPECT_GE(keyed, 30);
}

TEST(OpenApi, GetOpenapiJsonServesTheSameDocument) {
  const json::value doc = load_document();
  ServerProcess server(server_options());
  HttpClient anonymous(server.port());
  const HttpResponse r = anonymous.get("/openapi.json");
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_EQ(r.header("Content-Type").rfind("application/json", 0), 0u) << r.header("Content-Type");
  const json::value served = r.json();
  ASSERT_TRUE(served.is_object()) << "the served document is not JSON";
  EXPECT_EQ(served, doc) << "GET /openapi.json differs from docs/openapi.json (rebuild?)";
}

}  // namespace
}  // namespace tollgate::httptest
