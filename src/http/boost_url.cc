#include <boost/url/src.hpp>  // Boost.URL, compiled header-only into this one file
