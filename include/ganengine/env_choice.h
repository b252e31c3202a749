// Environment variables that pick one of a few named settings (GANENGINE_CONV_ALGOS,
// GANENGINE_CONV_SEARCH, GANENGINE_CONV_8CH): unset or empty means the first choice, the
// default; a value not listed is an error that names the variable and every choice.
#pragma once
#include <initializer_list>
#include <string>

namespace ge {

std::string env_choice(const char* name, std::initializer_list<const char*> choices);

}  // namespace ge
